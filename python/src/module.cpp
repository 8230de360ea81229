// msa._C: the extension module. Errors: msa::ArgError -> ValueError, msa::Error ->
// RuntimeError, each with msa's message.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "hal/error.h"
#include "hal/registry.h"
#include "hal/version.h"
#include "ops/ops.h"
#include "python/src/call.h"
#include "python/src/op_bindings.h"

namespace py = pybind11;
using namespace msa;
using namespace msa::python;

namespace {

py::list devices() {
  py::list out;
  for (const auto& b : hal::list_backends()) {
    py::dict d;
    d["backend"] = b.name;
    d["compiled"] = b.compiled;
    d["devices"] = b.devices;
    d["descriptions"] = b.descriptions;
    d["cpu_emulated"] = std::vector<bool>(b.cpu_emulated.begin(), b.cpu_emulated.end());
    d["unavailable_reason"] = b.unavailable_reason;
    out.append(d);
  }
  return out;
}

// The device's kernel-choice knobs (hal/tuning.h) as a list of dicts.
py::list tuning(const std::string& device) {
  py::list out;
  for (const auto& k : cached_device(device).tuning()) {
    py::dict d;
    d["name"] = k.name;
    d["value"] = k.value;
    d["default"] = k.dflt;
    d["env"] = k.env;
    d["shown"] = k.shown;
    d["help"] = k.help;
    out.append(d);
  }
  return out;
}

std::vector<int32_t> host_i32(const std::string& arg, py::handle obj) {
  Call c("count_query_blocks", "cpu-ref", 0);
  const int slot = c.arg(arg.c_str(), obj, Role::in);
  c.bind();
  const hal::Tensor t = c.tensor(slot);
  if (t.rank != 1) throw_arg_error("count_query_blocks", arg, "must have rank 1, got " + t.str());
  if (t.dtype != hal::DType::i32) throw_arg_error("count_query_blocks", arg, "must be int32, got " + t.str());
  const auto* p = t.data<const int32_t>();
  return std::vector<int32_t>(p, p + t.numel());
}

int64_t count_query_blocks(py::handle cu_q, py::handle kv_len, int64_t Qb) {
  if (Qb < 1 || Qb > 128) throw_arg_error("count_query_blocks", "Qb", "must be 1 or a power of two up to 128");
  const auto cu = host_i32("cu_q", cu_q);
  const auto len = host_i32("kv_len", kv_len);
  return ops::count_query_blocks(cu, len, static_cast<int>(Qb));
}

// Raises the device-side errors flagged on `stream` of `device` (waits for it).
void check_errors(const std::string& device, uint64_t stream) {
  hal::Device& d = cached_device(device);
  if (d.name().rfind("cuda:", 0) == 0) d.use_native_stream(native_stream(stream));
  try {
    d.stream().synchronize();
  } catch (...) {
    d.use_native_stream(nullptr);
    throw;
  }
  d.use_native_stream(nullptr);
}

// `allocate(nbytes)` returns the address of device memory it keeps alive (see
// hal::Device::set_workspace_provider); msa/_workspace.py supplies torch's allocator.
void set_workspace_allocator(const std::string& device, py::function allocate) {
  hal::Device& d = cached_device(device);
  // The function lives as long as the device (for the process): leaked on purpose, so that
  // no Python object is released after the interpreter has gone.
  auto* fn = new py::function(std::move(allocate));
  d.set_workspace_provider([fn](size_t bytes) -> void* {
    py::gil_scoped_acquire gil;
    return reinterpret_cast<void*>((*fn)(bytes).cast<uintptr_t>());
  });
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "msa's op API over DLPack tensors (see the msa package for the Python functions)";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ArgError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });
  m.attr("__version__") = msa::version();  // of the libmsa loaded
  m.def("devices", &devices, "Every backend msa knows, compiled in or not, and the devices found.");
  m.def("default_host_device", &default_host_device, "The device CPU tensors run on by default.");
  m.def(
      "open_device", [](const std::string& name) { return cached_device(name).name(); },
      "Opens (once) the device `name` and returns its canonical name.");
  m.def("tuning", &tuning, "The kernel-choice knobs of `device` and their values.");
  m.def(
      "set_tuning",
      [](const std::string& device, const std::string& knob, const std::string& value) {
        cached_device(device).set_tuning(knob, value);
      },
      "Sets one kernel-choice knob of `device` for the ops called from now on.");
  m.def("count_query_blocks", &count_query_blocks, "NQ of a varlen batch from host cu_q and kv_len.");
  m.def("check_errors", &check_errors, "Waits for `stream` of `device` and raises its device-side index errors.");
  m.def("set_workspace_allocator", &set_workspace_allocator,
        "Makes the streams of `device` take scratch memory from allocate(nbytes) -> address.");
  bind_attention_ops(m);
  bind_support_ops(m);
  bind_training_ops(m);
}
