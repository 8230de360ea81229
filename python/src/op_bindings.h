// The op functions of msa._C: one per op of the op API (the training ops included), taking every argument
// positionally (the Python layer, msa/_ops.py, resolves defaults and allocates outputs).
#pragma once
#include <pybind11/pybind11.h>

namespace msa::python {

void bind_attention_ops(pybind11::module_& m);
void bind_support_ops(pybind11::module_& m);
void bind_training_ops(pybind11::module_& m);

}  // namespace msa::python
