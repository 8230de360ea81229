// msa op NAME --in inputs.safetensors --out outputs.safetensors [--param key=value ...]:
// runs one op on the chosen backend. Tensor and parameter names are the contract's
// (docs/ops-cli.md lists them per op).
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "hal/error.h"
#include "hal/registry.h"
#include "hal/safetensors.h"
#include "ops/ops.h"
#include "tools/commands.h"
#include "tools/op_io.h"
#include "tools/op_params.h"
#include "tools/op_runner.h"

namespace msa::cli {
namespace {

using hal::DType;

ops::Pool parse_pool(const std::string& s) {
  if (s == "max") return ops::Pool::max;
  if (s == "lse") return ops::Pool::lse;
  throw Error("argument '--param pool': '" + s + "' is not max or lse");
}

ops::NormKind parse_kind(const std::string& s) {
  if (s == "gemma") return ops::NormKind::gemma;
  if (s == "plain") return ops::NormKind::plain;
  throw Error("argument '--param kind': '" + s + "' is not gemma or plain");
}

int I(OpParams& p, const char* k, int def) { return int_param(p, k, def); }
float F(OpParams& p, const char* k, float def) { return float_param(p, k, def); }
float scale_of(OpParams& p) { return scale_param(p, "scale"); }

RunnerTable runners() {
  RunnerTable r;
  r["indexer_score"] = [](hal::Device& d, OpIo& io, OpParams& p) {
    ops::IndexerScoreArgs a;
    a.qi = io.in("qi"), a.ki_cache = io.in("ki_cache"), a.ki_scale = io.opt("ki_scale");
    a.block_table = io.in("block_table"), a.kv_len = io.in("kv_len"), a.cu_q = io.in("cu_q");
    a.Qb = I(p, "Qb", 1), a.NQ = resolve_nq(io, p, a.Qb, a.qi.shape[0], "qi");
    a.mode = parse_mode(p.get_str("mode", "per_kv_head")), a.pool = parse_pool(p.get_str("pool", "max"));
    a.scale = scale_of(p);
    a.block_score = io.out("block_score", DType::f32, {a.NQ, a.qi.shape[1], a.block_table.shape[1]});
    ops::indexer_score(d, a);
  };
  r["block_topk"] = [](hal::Device& d, OpIo& io, OpParams& p) {
    ops::BlockTopkArgs a;
    a.block_score = io.in("block_score"), a.kv_len = io.in("kv_len"), a.cu_q = io.in("cu_q");
    a.Qb = I(p, "Qb", 1), a.NQ = resolve_nq(io, p, a.Qb, a.block_score.shape[0], "block_score");
    a.Bs = I(p, "Bs", 128), a.k = I(p, "k", 16), a.n_sink = I(p, "n_sink", 0), a.n_local = I(p, "n_local", 1);
    // A row selects at most its max_blocks blocks (or the forced ones): a larger k only
    // pads block_idx with -1, so it is refused before block_idx is allocated.
    const int64_t forced = int64_t{a.n_sink} + std::max(0, a.n_local) + std::max(1, a.Qb / std::max(1, a.Bs));
    const int64_t max_k = std::max<int64_t>(a.block_score.shape[2], forced);
    if (a.k > max_k)
      throw Error("argument '--param k': " + std::to_string(a.k) + " is more than the " + std::to_string(max_k) +
                  " blocks a row can select (block_score has " + std::to_string(a.block_score.shape[2]) +
                  " blocks per row)");
    a.block_idx = io.out("block_idx", DType::i32, {a.NQ, a.block_score.shape[1], a.k});
    a.block_cnt = io.out("block_cnt", DType::i32, {a.NQ, a.block_score.shape[1]});
    ops::block_topk(d, a);
  };
  r["sparse_block_attention"] = [](hal::Device& d, OpIo& io, OpParams& p) {
    ops::SparseAttentionArgs a;
    a.q = io.in("q"), a.k_cache = io.in("k_cache"), a.v_cache = io.in("v_cache");
    a.block_table = io.in("block_table"), a.kv_len = io.in("kv_len"), a.cu_q = io.in("cu_q");
    a.block_idx = io.in("block_idx");
    a.Qb = I(p, "Qb", 1), a.NQ = resolve_nq(io, p, a.Qb, a.q.shape[0], "q");
    a.mode = parse_mode(p.get_str("mode", "per_kv_head")), a.scale = scale_of(p);
    a.out = io.out("out", a.q.dtype, {a.q.shape[0], a.q.shape[1], a.q.shape[2]});
    a.lse = io.out("lse", DType::f32, {a.q.shape[0], a.q.shape[1]});
    ops::sparse_block_attention(d, a);
  };
  r["dense_attention"] = [](hal::Device& d, OpIo& io, OpParams& p) {
    ops::DenseAttentionArgs a;
    a.q = io.in("q"), a.k_cache = io.in("k_cache"), a.v_cache = io.in("v_cache");
    a.block_table = io.in("block_table"), a.kv_len = io.in("kv_len"), a.cu_q = io.in("cu_q");
    a.scale = scale_of(p);
    a.out = io.out("out", a.q.dtype, {a.q.shape[0], a.q.shape[1], a.q.shape[2]});
    a.lse = io.out("lse", DType::f32, {a.q.shape[0], a.q.shape[1]});
    ops::dense_attention(d, a);
  };
  r["patch_attention_3d"] = [](hal::Device& d, OpIo& io, OpParams& p) {
    ops::PatchAttention3dArgs a;
    a.q = io.in("q"), a.k = io.in("k"), a.v = io.in("v"), a.items = io.in("items");
    a.window = I(p, "window", 4), a.scale = scale_of(p);
    a.out = io.out("out", a.q.dtype, {a.q.shape[0], a.q.shape[1], a.q.shape[2]});
    a.lse = io.out("lse", DType::f32, {a.q.shape[0], a.q.shape[1]});
    ops::patch_attention_3d(d, a);
  };
  r["kv_append"] = [](hal::Device& d, OpIo& io, OpParams&) {
    ops::KvAppendArgs a;
    a.k = io.in("k"), a.v = io.in("v"), a.ki = io.opt("ki");
    a.block_table = io.in("block_table"), a.kv_len = io.in("kv_len"), a.cu_q = io.in("cu_q");
    a.k_cache = io.inout("k_cache", true), a.v_cache = io.inout("v_cache", true);
    a.ki_cache = io.inout("ki_cache", false), a.ki_scale = io.inout("ki_scale", false);
    ops::kv_append(d, a);
  };
  r["matmul"] = [](hal::Device& d, OpIo& io, OpParams&) {
    ops::MatmulArgs a;
    a.x = io.in("x"), a.w = io.in("w"), a.bias = io.opt("bias");
    a.y = io.out("y", a.x.dtype, {a.x.shape[0], a.w.shape[0]});
    ops::matmul(d, a);
  };
  auto like = [](OpIo& io, const hal::Tensor& x, const char* name) {
    return io.out(name, x.dtype, std::vector<int64_t>(x.shape.begin(), x.shape.begin() + x.rank));
  };
  r["rms_norm"] = [like](hal::Device& d, OpIo& io, OpParams& p) {
    ops::RmsNormArgs a;
    a.x = io.in("x"), a.w = io.in("w"), a.eps = F(p, "eps", 1e-6f), a.kind = parse_kind(p.get_str("kind", "gemma"));
    a.y = like(io, a.x, "y");
    ops::rms_norm(d, a);
  };
  r["layer_norm"] = [like](hal::Device& d, OpIo& io, OpParams& p) {
    ops::LayerNormArgs a;
    a.x = io.in("x"), a.w = io.in("w"), a.b = io.opt("b"), a.eps = F(p, "eps", 1e-6f);
    a.y = like(io, a.x, "y");
    ops::layer_norm(d, a);
  };
  r["rope"] = [like](hal::Device& d, OpIo& io, OpParams& p) {
    ops::RopeArgs a;
    a.x = io.in("x"), a.pos = io.in("pos"), a.rotary_dim = I(p, "rotary_dim", 0), a.theta = F(p, "theta", 1e4f);
    a.y = like(io, a.x, "y");
    ops::rope(d, a);
  };
  r["rope_3d"] = [like](hal::Device& d, OpIo& io, OpParams& p) {
    ops::Rope3dArgs a;
    a.x = io.in("x"), a.pos = io.in("pos"), a.theta = F(p, "theta", 1e4f);
    a.y = like(io, a.x, "y");
    ops::rope_3d(d, a);
  };
  r["swiglu"] = [like](hal::Device& d, OpIo& io, OpParams&) {
    ops::SwigluArgs a;
    a.gate = io.in("gate"), a.up = io.in("up"), a.y = like(io, a.gate, "y");
    ops::swiglu(d, a);
  };
  r["gelu"] = [like](hal::Device& d, OpIo& io, OpParams&) {
    ops::GeluArgs a;
    a.x = io.in("x"), a.y = like(io, a.x, "y");
    ops::gelu(d, a);
  };
  r["add"] = [like](hal::Device& d, OpIo& io, OpParams&) {
    ops::AddArgs a;
    a.a = io.in("a"), a.b = io.in("b"), a.y = like(io, a.a, "y");
    ops::add(d, a);
  };
  r["embedding"] = [](hal::Device& d, OpIo& io, OpParams&) {
    ops::EmbeddingArgs a;
    a.table = io.in("table"), a.ids = io.in("ids");
    a.y = io.out("y", a.table.dtype, {a.ids.shape[0], a.table.shape[1]});
    ops::embedding(d, a);
  };
  r["scatter_visual"] = [](hal::Device& d, OpIo& io, OpParams& p) {
    ops::ScatterVisualArgs a;
    a.tokens = io.in("tokens"), a.vis = io.in("vis"), a.placeholder = I(p, "placeholder", 0);
    a.x = io.inout("x", true);
    ops::scatter_visual(d, a);
  };
  r["argmax"] = [](hal::Device& d, OpIo& io, OpParams&) {
    ops::ArgmaxArgs a;
    a.x = io.in("x"), a.idx = io.out("idx", DType::i32, {a.x.shape[0]});
    ops::argmax(d, a);
  };
  add_training_runners(r);
  return r;
}

struct OpOptions {
  std::string backend, name, in, out;
  std::vector<std::string> params;
};

int run_op(const OpOptions& o) {
  auto table = runners();
  auto it = table.find(o.name);
  if (it == table.end()) {
    std::string known;
    for (const auto& [k, v] : table) known += (known.empty() ? "" : ", ") + k;
    throw Error("argument 'NAME': unknown op '" + o.name + "' (known: " + known + ")");
  }
  OpParams params(o.params);
  std::error_code ec;
  if (std::filesystem::equivalent(o.in, o.out, ec))
    throw Error("argument '--out': '" + o.out + "' is the --in file; write the outputs to another file");
  auto device = hal::create_device(o.backend);
  OpIo io(*device, hal::read_safetensors(o.in));
  it->second(*device, io, params);
  params.check_all_used(o.name);
  io.check_all_used(o.name);
  auto results = io.results();
  hal::write_safetensors(o.out, results, {{"op", o.name}, {"backend", device->name()}});
  std::printf("%s on %s: wrote", o.name.c_str(), device->name().c_str());
  for (const auto& [n, t] : results) std::printf(" %s %s", n.c_str(), t.str().c_str());
  std::printf(" to %s\n", o.out.c_str());
  return 0;
}

}  // namespace

Command add_op(CLI::App& app) {
  auto o = std::make_shared<OpOptions>();
  auto* sub = app.add_subcommand("op", "Run one op on tensors from a .safetensors file (see docs/ops-cli.md)");
  add_backend_option(sub, o->backend);
  sub->add_option("NAME", o->name, "Op name, e.g. sparse_block_attention")->required();
  sub->add_option("--in", o->in, "Input .safetensors (tensors named as the op's arguments)")->required();
  sub->add_option("--out", o->out, "Output .safetensors (tensors named as the op's outputs)")->required();
  sub->add_option("--param,-p", o->params,
                  "Scalar parameter key=value (Qb, NQ, k, n_sink, n_local, pool, mode, scale, ...)");
  return {sub, [o] { return run_op(*o); }};
}

}  // namespace msa::cli
