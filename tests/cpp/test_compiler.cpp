// The graph compiler without torch: fusion and memory planning decisions, and generated code
// compiled by the system compiler, loaded and run against a hand-written reference.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "compiler/artifact.h"
#include "compiler/codegen.h"
#include "compiler/ir.h"
#include "compiler/passes.h"

namespace cc = torchneuron::compiler;

namespace {

cc::Operand value(int id) { return cc::Operand{id, 0.0}; }
cc::Operand literal(double x) { return cc::Operand{-1, x}; }
const cc::DType f32 = cc::DType::kFloat32;

}  // namespace

TEST(Compiler, FusesAcrossEagerCallsAndPlansBuffers) {
  cc::Graph g;
  const cc::Shape shape{"s0", "8"};
  const int x = g.add_input(f32, shape);
  const int a = g.add_pointwise("sin", {value(x)}, f32, shape, f32);
  const int b = g.add_pointwise("mul", {value(a), literal(2.0)}, f32, shape, f32);
  const int unused = g.add_pointwise("exp", {value(x)}, f32, shape, f32);
  const auto eager = g.add_opaque(0, {b}, {f32}, {{"s0"}});  // e.g. a row sum
  const int c = g.add_pointwise("add", {value(b), literal(0.0)}, f32, shape, f32);  // folds to b
  const int d = g.add_pointwise("neg", {value(c)}, f32, shape, f32);  // no eager input: joins kernel 0
  const int e = g.add_pointwise("mul", {value(d), value(x)}, f32, shape, f32);
  g.mark_output(e);
  g.mark_output(eager[0]);
  (void)unused;
  const cc::Program p = cc::plan_program(g);
  EXPECT_EQ(p.removed_nodes, 2);  // the unused exp and the folded add
  ASSERT_EQ(p.kernels.size(), 1u);
  EXPECT_EQ(p.kernels[0].nodes.size(), 4u);
  EXPECT_EQ(p.kernels[0].inputs, std::vector<int>{x});
  // b is read by the eager call; e is the graph output; a and d never reach memory.
  EXPECT_EQ(p.kernels[0].outputs, (std::vector<int>{b, e}));
  ASSERT_EQ(p.steps.size(), 2u);
  EXPECT_TRUE(p.steps[0].is_kernel);
  EXPECT_FALSE(p.steps[1].is_kernel);
}

TEST(Compiler, ReusesDeadBuffersInPlace) {
  cc::Graph g;
  const cc::Shape big{"4", "4"}, small{"4"};
  const int x = g.add_input(f32, big);
  const int y = g.add_input(f32, small);
  const int a = g.add_pointwise("exp", {value(x)}, f32, big, f32);
  const int b = g.add_pointwise("add", {value(y), literal(1.0)}, f32, small, f32);  // other shape: kernel 1
  const int c = g.add_pointwise("mul", {value(a), value(b)}, f32, big, f32);     // needs b: kernel 2
  g.mark_output(c);
  const cc::Program p = cc::plan_program(g);
  ASSERT_EQ(p.kernels.size(), 3u);
  EXPECT_EQ(p.in_place[c], a);  // a dies in the kernel that makes c
  EXPECT_EQ(p.slot[c], p.slot[a]);
  EXPECT_NE(p.slot[b], p.slot[a]);
}

TEST(Compiler, RejectsUnknownOpsAndDtypes) {
  cc::Graph g;
  const int x = g.add_input(f32, {"3"});
  EXPECT_THROW(g.add_pointwise("no_such_op", {value(x)}, f32, {"3"}, f32), std::invalid_argument);
  EXPECT_THROW(g.add_pointwise("add", {value(x)}, f32, {"3"}, f32), std::invalid_argument);  // arity
  EXPECT_THROW(cc::parse_dtype("complex64"), std::invalid_argument);
}

TEST(Compiler, GeneratedKernelRunsAndMatchesReference) {
  cc::Graph g;
  const cc::Shape shape{"s0", "s1"};
  const int x = g.add_input(f32, shape);
  const int y = g.add_input(cc::DType::kBFloat16, {"s1"});
  const int a = g.add_pointwise("tanh", {value(x)}, f32, shape, f32);
  const int b = g.add_pointwise("mul", {value(a), value(y)}, f32, shape, f32);
  const int c = g.add_pointwise("gt", {value(b), literal(0.25)}, cc::DType::kBool, shape, f32);
  const int d = g.add_pointwise("where", {value(c), value(b), literal(-1.0)}, f32, shape, f32);
  g.mark_output(d);
  g.mark_output(c);
  const cc::Program p = cc::plan_program(g);
  ASSERT_EQ(p.kernels.size(), 1u);
  char dir[] = "/tmp/tn-compiler-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const cc::Artifact built = cc::build_artifact(cc::generate_source(g, p), dir);
  EXPECT_FALSE(built.cache_hit);
  EXPECT_TRUE(cc::build_artifact(cc::generate_source(g, p), dir).cache_hit);
  void* library = dlopen(built.path.c_str(), RTLD_NOW);
  ASSERT_NE(library, nullptr) << dlerror();
  auto kernel = reinterpret_cast<cc::KernelEntry>(dlsym(library, p.kernels[0].symbol.c_str()));
  ASSERT_NE(kernel, nullptr);
  // x: 3 x 5 transposed view of a 5 x 3 buffer; y broadcast along rows.
  const int64_t rows = 3, cols = 5;
  std::vector<float> x_data(rows * cols);
  for (size_t i = 0; i < x_data.size(); ++i) x_data[i] = 0.37f * static_cast<float>(i) - 2.0f;
  std::vector<uint16_t> y_data(cols);
  for (int64_t j = 0; j < cols; ++j) y_data[j] = static_cast<uint16_t>(0x3f80 + 0x10 * j);  // bf16 1.0, 1.125, ...
  std::vector<float> d_out(rows * cols);
  std::vector<char> c_out(rows * cols);
  // Operand order: outputs (the kernel's), then inputs.
  ASSERT_EQ(p.kernels[0].outputs, (std::vector<int>{c, d}));
  char* data[] = {c_out.data(), reinterpret_cast<char*>(d_out.data()), reinterpret_cast<char*>(x_data.data()),
                  reinterpret_cast<char*>(y_data.data())};
  const int64_t strides[] = {cols, 1, cols, 1, 1, rows, 0, 1};
  const int64_t sizes[] = {rows, cols};
  kernel(data, strides, sizes, 2, 0, 7);  // two calls: the range split must not matter
  kernel(data, strides, sizes, 2, 7, rows * cols);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      uint32_t bits = static_cast<uint32_t>(y_data[j]) << 16;
      float yv;
      std::memcpy(&yv, &bits, 4);
      const float b_ref = std::tanh(x_data[j * rows + i]) * yv;
      EXPECT_EQ(c_out[i * cols + j], b_ref > 0.25f);
      EXPECT_FLOAT_EQ(d_out[i * cols + j], b_ref > 0.25f ? b_ref : -1.0f);
    }
  }
  dlclose(library);
  std::system((std::string("rm -rf ") + dir).c_str());
}

TEST(Compiler, CompilerFailureNamesTheCompiler) {
  setenv("CXX", "/bin/false", 1);
  char dir[] = "/tmp/tn-compiler-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  try {
    cc::build_artifact("int main() {}", dir);
    FAIL() << "expected a compiler failure";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("the system compiler failed (/bin/false"), std::string::npos) << error.what();
  }
  unsetenv("CXX");
  std::system((std::string("rm -rf ") + dir).c_str());
}
