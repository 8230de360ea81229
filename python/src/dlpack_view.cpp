#include "python/src/dlpack_view.h"

#include <dlpack/dlpack.h>

#include "hal/error.h"

namespace msa::python {
namespace {

// DLPack 1.1's kDLFloat8_e4m3fn (the Debian 12 header is DLPack 0.6, which lacks it).
constexpr uint8_t kDLFloat8E4M3fnCode = 10;

// torch's objects, looked up once torch has been imported by the caller (msa never
// imports it): tensors go through torch._C._to_dlpack, which skips __dlpack__'s
// Python-level checks, and fp8 tensors through a uint8 view (torch's DLPack export of
// float8 dtypes depends on its version).
struct TorchHooks {
  bool looked = false;
  PyTypeObject* tensor_type = nullptr;
  py::object to_dlpack, float8_e4m3fn, uint8;
};

TorchHooks& torch_hooks() {
  static TorchHooks* hooks = new TorchHooks();  // never destroyed: outlives the interpreter's teardown
  if (!hooks->looked) {
    py::dict modules = py::module_::import("sys").attr("modules");
    if (!modules.contains("torch")) return *hooks;
    py::object torch = modules["torch"];
    hooks->looked = true;
    hooks->tensor_type = reinterpret_cast<PyTypeObject*>(torch.attr("Tensor").ptr());
    py::object c = torch.attr("_C");
    hooks->to_dlpack = py::hasattr(c, "_to_dlpack")
                           ? py::object(c.attr("_to_dlpack"))
                           : py::object(py::module_::import("torch.utils.dlpack").attr("to_dlpack"));
    hooks->float8_e4m3fn = py::getattr(torch, "float8_e4m3fn", py::none());
    hooks->uint8 = torch.attr("uint8");
  }
  return *hooks;
}

[[noreturn]] void fail(const std::string& where, const std::string& arg, const std::string& what) {
  throw_arg_error(where, arg, what);
}

// The capsule of `obj`; `fp8` is set when a torch float8_e4m3fn tensor was viewed as uint8.
py::object capsule_of(py::handle obj, const std::string& where, const std::string& arg, bool& fp8) {
  TorchHooks& torch = torch_hooks();
  if (torch.tensor_type != nullptr && PyObject_TypeCheck(obj.ptr(), torch.tensor_type)) {
    py::handle t = obj;
    py::object viewed;
    if (!torch.float8_e4m3fn.is_none() && py::object(obj.attr("dtype")).is(torch.float8_e4m3fn)) {
      viewed = obj.attr("view")(torch.uint8);
      t = viewed;
      fp8 = true;
    }
    try {
      return torch.to_dlpack(t);
    } catch (py::error_already_set&) {
      // torch refuses to export a tensor that requires grad; msa reads its values (the
      // Python layer routes differentiable calls through autograd first).
      if (!py::object(t.attr("requires_grad")).cast<bool>()) throw;
      return torch.to_dlpack(t.attr("detach")());
    }
  }
  if (!py::hasattr(obj, "__dlpack__"))
    fail(where, arg,
         std::string("expected a tensor (torch.Tensor, numpy.ndarray or any DLPack producer), got ") +
             Py_TYPE(obj.ptr())->tp_name);
  try {
    return obj.attr("__dlpack__")();
  } catch (py::error_already_set& e) {
    fail(where, arg, std::string("cannot be read through DLPack: ") + e.what());
  }
}

hal::DType dtype_of(const DLDataType& t, bool fp8, ByteRole bytes, bool& int64_index, const std::string& where,
                    const std::string& arg) {
  if (t.lanes != 1) fail(where, arg, "vector dtypes (lanes > 1) are not supported");
  if (t.code == kDLFloat && t.bits == 32) return hal::DType::f32;
  if (t.code == kDLFloat && t.bits == 16) return hal::DType::f16;
  if (t.code == kDLBfloat && t.bits == 16) return hal::DType::bf16;
  if (t.code == kDLInt && t.bits == 32) return hal::DType::i32;
  if (t.code == kDLInt && t.bits == 64) {
    int64_index = true;
    return hal::DType::i32;
  }
  if (t.code == kDLFloat8E4M3fnCode && t.bits == 8) return hal::DType::fp8_e4m3;
  if (t.code == kDLUInt && t.bits == 8) {
    if (fp8) return hal::DType::fp8_e4m3;
    if (bytes == ByteRole::nvfp4_codes) return hal::DType::fp4_e2m1x2;
    if (bytes == ByteRole::fp8_bytes) return hal::DType::fp8_e4m3;
    fail(where, arg,
         "dtype uint8 is not taken here (uint8 means NVFP4 codes for ki_cache and e4m3 bytes for its ki_scale)");
  }
  std::string name = t.code == kDLFloat    ? "float"
                     : t.code == kDLInt    ? "int"
                     : t.code == kDLUInt   ? "uint"
                     : t.code == kDLBfloat ? "bfloat"
                                           : "code " + std::to_string(t.code) + " ";
  fail(where, arg,
       "dtype " + name + std::to_string(t.bits) +
           " is not supported (float32, bfloat16, float16, float8_e4m3fn, int32; int64 for index tensors on the CPU)");
}

}  // namespace

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= shape[i];
  return n;
}

size_t TensorView::nbytes() const { return static_cast<size_t>(numel()) * (int64_index ? 8 : hal::dtype_size(dtype)); }

std::string TensorView::where() const { return memory == Memory::host ? "cpu" : "cuda:" + std::to_string(device_id); }

TensorView view_of(py::handle obj, const std::string& where, const std::string& arg, ByteRole bytes) {
  TensorView v;
  bool fp8 = false;
  v.capsule = capsule_of(obj, where, arg, fp8);
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(v.capsule.ptr(), "dltensor"));
  if (managed == nullptr) {
    PyErr_Clear();
    fail(where, arg, "its __dlpack__ did not return a 'dltensor' capsule");
  }
  const DLTensor& t = managed->dl_tensor;
  switch (t.device.device_type) {
    case kDLCPU:
    case kDLCUDAHost:
      v.memory = Memory::host;
      break;
    case kDLCUDA:
    case kDLCUDAManaged:
      v.memory = Memory::cuda;
      v.device_id = t.device.device_id;
      break;
    default:
      fail(where, arg,
           "lives on DLPack device type " + std::to_string(t.device.device_type) + " (msa reads CPU and CUDA memory)");
  }
  if (t.ndim < 0 || t.ndim > hal::kMaxRank)
    fail(where, arg,
         "has " + std::to_string(t.ndim) + " dims (msa tensors have at most " + std::to_string(hal::kMaxRank) + ")");
  v.rank = t.ndim;
  int64_t expected = 1;
  bool contiguous = true;
  for (int i = t.ndim - 1; i >= 0; --i) {
    v.shape[i] = t.shape[i];
    if (t.strides != nullptr && t.shape[i] != 1 && t.strides[i] != expected) contiguous = false;
    expected *= t.shape[i];
  }
  // An empty tensor has no layout to get wrong (torch reports arbitrary strides for it).
  if (!contiguous && expected != 0)
    fail(where, arg, "is not contiguous (call .contiguous() on it, or numpy.ascontiguousarray)");
  v.dtype = dtype_of(t.dtype, fp8, bytes, v.int64_index, where, arg);
  if (v.int64_index && v.memory != Memory::host)
    fail(where, arg, "is int64 on " + v.where() + ": msa's index tensors are int32 (pass it as .int())");
  v.data = static_cast<char*>(t.data) + t.byte_offset;
  return v;
}

}  // namespace msa::python
