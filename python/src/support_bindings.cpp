// msa._C's supporting ops (the model's matmul, norms, rotary embeddings, activations,
// embedding lookups, argmax).
#include <string>

#include "ops/ops.h"
#include "python/src/call.h"
#include "python/src/op_bindings.h"
#include "python/src/scalars.h"

namespace msa::python {
namespace {

using py::handle;
using Str = const std::string&;

// Ops of the shape y = f(inputs...): binds the inputs and the output `y`, runs `run`.
template <typename Args, typename Fill>
void run_simple(Str op, Str backend, uint64_t stream, std::initializer_list<std::pair<const char*, handle>> inputs,
                const char* out_name, handle out, Role out_role, void (*run)(hal::Device&, const Args&), Fill fill) {
  Call c(op, backend, stream);
  std::vector<int> slots;
  for (const auto& [name, obj] : inputs) slots.push_back(c.arg(name, obj, Role::in));
  const int io = c.arg(out_name, out, out_role);
  hal::Device& d = c.bind();
  Args a;
  std::vector<hal::Tensor> t;
  for (int s : slots) t.push_back(c.tensor(s));
  fill(a, t, c.tensor(io));
  run(d, a);
  c.finish();
}

}  // namespace

void bind_support_ops(py::module_& m) {
  m.def("matmul", [](Str backend, uint64_t stream, handle x, handle w, handle bias, handle y) {
    run_simple<ops::MatmulArgs>("matmul", backend, stream, {{"x", x}, {"w", w}, {"bias", bias}}, "y", y, Role::out,
                                &ops::matmul, [](ops::MatmulArgs& a, const std::vector<hal::Tensor>& t, hal::Tensor o) {
                                  a.x = t[0], a.w = t[1], a.bias = t[2], a.y = o;
                                });
  });
  m.def("rms_norm", [](Str backend, uint64_t stream, handle x, handle w, double eps, Str kind, handle y) {
    const float e = to_float("rms_norm", "eps", eps);
    const ops::NormKind k = to_norm_kind("rms_norm", kind);
    run_simple<ops::RmsNormArgs>("rms_norm", backend, stream, {{"x", x}, {"w", w}}, "y", y, Role::out, &ops::rms_norm,
                                 [&](ops::RmsNormArgs& a, const std::vector<hal::Tensor>& t, hal::Tensor o) {
                                   a.x = t[0], a.w = t[1], a.eps = e, a.kind = k, a.y = o;
                                 });
  });
  m.def("layer_norm", [](Str backend, uint64_t stream, handle x, handle w, handle b, double eps, handle y) {
    const float e = to_float("layer_norm", "eps", eps);
    run_simple<ops::LayerNormArgs>("layer_norm", backend, stream, {{"x", x}, {"w", w}, {"b", b}}, "y", y, Role::out,
                                   &ops::layer_norm,
                                   [&](ops::LayerNormArgs& a, const std::vector<hal::Tensor>& t, hal::Tensor o) {
                                     a.x = t[0], a.w = t[1], a.b = t[2], a.eps = e, a.y = o;
                                   });
  });
  // rope and rope_3d may write in place (y is x): y is then the same range, which the
  // op's own checks accept.
  m.def("rope", [](Str backend, uint64_t stream, handle x, handle pos, int64_t rotary_dim, double theta, handle y) {
    const int r = to_int("rope", "rotary_dim", rotary_dim);
    const float th = to_float("rope", "theta", theta);
    run_simple<ops::RopeArgs>("rope", backend, stream, {{"x", x}, {"pos", pos}}, "y", y, Role::inout, &ops::rope,
                              [&](ops::RopeArgs& a, const std::vector<hal::Tensor>& t, hal::Tensor o) {
                                a.x = t[0], a.pos = t[1], a.rotary_dim = r, a.theta = th, a.y = o;
                              });
  });
  m.def("rope_3d", [](Str backend, uint64_t stream, handle x, handle pos, double theta, handle y) {
    const float th = to_float("rope_3d", "theta", theta);
    run_simple<ops::Rope3dArgs>("rope_3d", backend, stream, {{"x", x}, {"pos", pos}}, "y", y, Role::inout,
                                &ops::rope_3d,
                                [&](ops::Rope3dArgs& a, const std::vector<hal::Tensor>& t, hal::Tensor o) {
                                  a.x = t[0], a.pos = t[1], a.theta = th, a.y = o;
                                });
  });
  m.def("swiglu", [](Str backend, uint64_t stream, handle gate, handle up, handle y) {
    run_simple<ops::SwigluArgs>("swiglu", backend, stream, {{"gate", gate}, {"up", up}}, "y", y, Role::out,
                                &ops::swiglu, [](ops::SwigluArgs& a, const std::vector<hal::Tensor>& t, hal::Tensor o) {
                                  a.gate = t[0], a.up = t[1], a.y = o;
                                });
  });
  m.def("gelu", [](Str backend, uint64_t stream, handle x, handle y) {
    run_simple<ops::GeluArgs>(
        "gelu", backend, stream, {{"x", x}}, "y", y, Role::out, &ops::gelu,
        [](ops::GeluArgs& a, const std::vector<hal::Tensor>& t, hal::Tensor o) { a.x = t[0], a.y = o; });
  });
  m.def("add", [](Str backend, uint64_t stream, handle a_in, handle b_in, handle y) {
    run_simple<ops::AddArgs>(
        "add", backend, stream, {{"a", a_in}, {"b", b_in}}, "y", y, Role::out, &ops::add,
        [](ops::AddArgs& a, const std::vector<hal::Tensor>& t, hal::Tensor o) { a.a = t[0], a.b = t[1], a.y = o; });
  });
  m.def("embedding", [](Str backend, uint64_t stream, handle table, handle ids, handle y) {
    run_simple<ops::EmbeddingArgs>("embedding", backend, stream, {{"table", table}, {"ids", ids}}, "y", y, Role::out,
                                   &ops::embedding,
                                   [](ops::EmbeddingArgs& a, const std::vector<hal::Tensor>& t, hal::Tensor o) {
                                     a.table = t[0], a.ids = t[1], a.y = o;
                                   });
  });
  m.def("scatter_visual", [](Str backend, uint64_t stream, handle tokens, handle vis, handle x, int64_t placeholder) {
    const int p = to_int("scatter_visual", "placeholder", placeholder);
    run_simple<ops::ScatterVisualArgs>(
        "scatter_visual", backend, stream, {{"tokens", tokens}, {"vis", vis}}, "x", x, Role::inout,
        &ops::scatter_visual, [&](ops::ScatterVisualArgs& a, const std::vector<hal::Tensor>& t, hal::Tensor o) {
          a.tokens = t[0], a.vis = t[1], a.placeholder = p, a.x = o;
        });
  });
  m.def("argmax", [](Str backend, uint64_t stream, handle x, handle idx) {
    run_simple<ops::ArgmaxArgs>(
        "argmax", backend, stream, {{"x", x}}, "idx", idx, Role::out, &ops::argmax,
        [](ops::ArgmaxArgs& a, const std::vector<hal::Tensor>& t, hal::Tensor o) { a.x = t[0], a.idx = o; });
  });
}

}  // namespace msa::python
