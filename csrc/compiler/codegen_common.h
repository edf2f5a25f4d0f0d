// What the code generator's translation units (codegen*.cpp) share: C++ types, loads and stores
// per dtype, a node's statement, broadcast unswitching, and the source of each kind of Kernel.
#pragma once

#include <string>
#include <vector>

#include "compiler/ir.h"
#include "compiler/passes.h"

namespace torchneuron::compiler::codegen_detail {

// Expressions and statements (codegen.cpp).
const char* compute_type(DType dtype);
const char* storage_type(DType dtype);
std::string load_expression(DType dtype, const std::string& element);
std::string store_expression(DType dtype, const std::string& value);
std::string expand_template(const std::string& pattern, const std::vector<std::string>& operands,
                            const std::string& type);
std::string kept(const Graph& graph, const Node& node, const std::string& value);
std::string node_line(const Graph& graph, const Node& node, const std::string& indent);
std::string unswitch_broadcasts(const std::string& loop, const std::vector<int>& flags, const std::string& index,
                                const std::string& indent);

// The source of one Kernel: pointwise (codegen_pointwise.cpp), folding inner dims a row at a
// time (codegen_reduction.cpp), or folding outer dims a block of columns at a time
// (codegen_column.cpp).
std::string kernel_source(const Graph& graph, const Kernel& kernel);
std::string reduction_kernel_source(const Graph& graph, const Kernel& kernel);
std::string column_kernel_source(const Graph& graph, const Kernel& kernel);

// The reductions' vocabulary (codegen_reduction.cpp), which column kernels share.
bool is_full(const Graph& graph, const Kernel& kernel, int value);
bool keeps_nan_flag(const Node& node);
std::string accumulator_init(const std::string& op, const std::string& type);
std::string accumulate(const std::string& op, const std::string& a, const std::string& b);

}  // namespace torchneuron::compiler::codegen_detail
