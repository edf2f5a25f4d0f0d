// The graph compiler without torch: fusion and memory planning decisions, and generated code
// compiled by the system compiler, loaded and run against a hand-written reference.
#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
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

TEST(Compiler, ReductionsFuseWithTheirNeighbours) {
  // RMS norm then a softmax over the same rows: one kernel; a sum without keepdim is read only
  // by a later kernel, since its dims no longer line up with the rows.
  cc::Graph g;
  const cc::Shape shape{"16", "16"}, row{"16", "1"};
  const int x = g.add_input(f32, shape);
  const int w = g.add_input(f32, {"16"});
  const int square = g.add_pointwise("mul", {value(x), value(x)}, f32, shape, f32);
  const int mean = g.add_reduction("mean", square, {-1}, true, f32, f32);
  const int scale = g.add_pointwise("rsqrt", {value(mean)}, f32, row, f32);
  const int y = g.add_pointwise("mul", {value(x), value(scale)}, f32, shape, f32);
  const int z = g.add_pointwise("mul", {value(y), value(w)}, f32, shape, f32);
  const int top = g.add_reduction("amax", z, {1}, true, f32, f32);
  const int shifted = g.add_pointwise("sub", {value(z), value(top)}, f32, shape, f32);
  const int e = g.add_pointwise("exp", {value(shifted)}, f32, shape, f32);
  const int total = g.add_reduction("sum", e, {1}, false, f32, f32);  // [16]
  const int bad = g.add_pointwise("add", {value(e), value(total)}, f32, shape, f32);  // total along dim 1
  g.mark_output(bad);
  EXPECT_EQ(g.values()[mean].shape, row);
  EXPECT_EQ(g.values()[total].shape, cc::Shape{"16"});
  EXPECT_THROW(g.add_reduction("sum", x, {2}, false, f32, f32), std::invalid_argument);
  EXPECT_THROW(g.add_reduction("prod", x, {1}, false, f32, f32), std::invalid_argument);
  const cc::Program p = cc::plan_program(g);
  ASSERT_EQ(p.kernels.size(), 2u);
  EXPECT_EQ(p.kernels[0].reduce_dims, std::vector<int>{1});
  EXPECT_EQ(p.kernels[0].nodes.size(), 9u);
  EXPECT_EQ(p.kernels[0].outputs, (std::vector<int>{e, total}));
  EXPECT_TRUE(p.kernels[1].reduce_dims.empty());
  EXPECT_EQ(p.kernels[1].nodes.size(), 1u);
}

TEST(Compiler, GeneratedReductionKernelRunsAndMatchesReference) {
  // Per row: y = x * rsqrt(mean(x * x) + eps) * w and the row's max of y, over rows of 21
  // (not a multiple of the 8 lanes), with x contiguous and then transposed (the strided path).
  cc::Graph g;
  const cc::Shape shape{"s0", "s1"};
  const int x = g.add_input(f32, shape);
  const int w = g.add_input(f32, {"s1"});
  const int square = g.add_pointwise("mul", {value(x), value(x)}, f32, shape, f32);
  const int mean = g.add_reduction("mean", square, {1}, true, f32, f32);
  const int shifted = g.add_pointwise("add", {value(mean), literal(1e-5)}, f32, {"s0", "1"}, f32);
  const int scale = g.add_pointwise("rsqrt", {value(shifted)}, f32, {"s0", "1"}, f32);
  const int y = g.add_pointwise("mul", {value(x), value(scale)}, f32, shape, f32);
  const int z = g.add_pointwise("mul", {value(y), value(w)}, f32, shape, f32);
  const int top = g.add_reduction("amax", z, {1}, false, f32, f32);
  g.mark_output(z);
  g.mark_output(top);
  const cc::Program p = cc::plan_program(g);
  ASSERT_EQ(p.kernels.size(), 1u);
  ASSERT_EQ(p.kernels[0].outputs, (std::vector<int>{z, top}));
  ASSERT_EQ(p.kernels[0].inputs, (std::vector<int>{x, w}));
  char dir[] = "/tmp/tn-compiler-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const cc::Artifact built = cc::build_artifact(cc::generate_source(g, p), dir);
  void* library = dlopen(built.path.c_str(), RTLD_NOW);
  ASSERT_NE(library, nullptr) << dlerror();
  auto kernel = reinterpret_cast<cc::ReductionEntry>(dlsym(library, p.kernels[0].symbol.c_str()));
  ASSERT_NE(kernel, nullptr);
  const int64_t rows = 5, cols = 21;
  std::vector<float> x_data(rows * cols), w_data(cols);
  for (size_t i = 0; i < x_data.size(); ++i) x_data[i] = std::sin(0.7f * static_cast<float>(i)) * 3.0f;
  for (int64_t j = 0; j < cols; ++j) w_data[j] = 0.5f + 0.1f * static_cast<float>(j);
  for (const bool transposed : {false, true}) {
    std::vector<float> z_out(rows * cols), top_out(rows);
    char* data[] = {reinterpret_cast<char*>(z_out.data()), reinterpret_cast<char*>(top_out.data()),
                    reinterpret_cast<char*>(x_data.data()), reinterpret_cast<char*>(w_data.data())};
    // [operand][dim]: z row-major, top one value per row, x row-major or a transposed buffer, w broadcast.
    const int64_t strides[] = {cols, 1, 1, 0, transposed ? 1 : cols, transposed ? rows : 1, 0, 1};
    const int64_t sizes[] = {rows, cols};
    kernel(data, strides, sizes, 2, 1, 0, 2);  // two calls: the row split must not matter
    kernel(data, strides, sizes, 2, 1, 2, rows);
    for (int64_t i = 0; i < rows; ++i) {
      auto at = [&](int64_t j) { return transposed ? x_data[j * rows + i] : x_data[i * cols + j]; };
      double sum = 0;
      for (int64_t j = 0; j < cols; ++j) sum += double(at(j)) * at(j);
      const float scale_ref = 1.0f / std::sqrt(static_cast<float>(sum / cols) + 1e-5f);
      float top_ref = -INFINITY;
      for (int64_t j = 0; j < cols; ++j) {
        const float z_ref = at(j) * scale_ref * w_data[j];
        EXPECT_NEAR(z_out[i * cols + j], z_ref, 1e-5f * std::fabs(z_ref) + 1e-6f) << transposed << " " << i << " " << j;
        top_ref = std::max(top_ref, z_ref);
      }
      EXPECT_NEAR(top_out[i], top_ref, 1e-5f * std::fabs(top_ref));
    }
  }
  dlclose(library);
  std::system((std::string("rm -rf ") + dir).c_str());
}

TEST(Compiler, SoftmaxKeepsItsExponentialsInAStash) {
  // exp(x - max) feeds the row sum (loop 1) and the division (loop 2): it is computed once,
  // kept in a row-long stash, and read back, rather than computed twice.
  cc::Graph g;
  const cc::Shape shape{"s0", "s1"}, row{"s0", "1"};
  const int x = g.add_input(f32, shape);
  const int top = g.add_reduction("amax", x, {1}, true, f32, f32);
  const int shifted = g.add_pointwise("sub", {value(x), value(top)}, f32, shape, f32);
  const int e = g.add_pointwise("exp", {value(shifted)}, f32, shape, f32);
  const int total = g.add_reduction("sum", e, {1}, true, f32, f32);
  const int p = g.add_pointwise("div", {value(e), value(total)}, f32, shape, f32);
  g.mark_output(p);
  const cc::Program program = cc::plan_program(g);
  ASSERT_EQ(program.kernels.size(), 1u);
  const std::string source = cc::generate_source(g, program);
  EXPECT_NE(source.find("stash" + std::to_string(e) + "[j] = v" + std::to_string(e)), std::string::npos);
  EXPECT_EQ(source.find("stash" + std::to_string(shifted)), std::string::npos);  // cheap: recomputed, not kept
  char dir[] = "/tmp/tn-compiler-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const cc::Artifact built = cc::build_artifact(source, dir);
  void* library = dlopen(built.path.c_str(), RTLD_NOW);
  ASSERT_NE(library, nullptr) << dlerror();
  auto kernel = reinterpret_cast<cc::ReductionEntry>(dlsym(library, program.kernels[0].symbol.c_str()));
  ASSERT_NE(kernel, nullptr);
  const int64_t rows = 3, cols = 37;
  std::vector<float> x_data(rows * cols), out(rows * cols);
  for (size_t i = 0; i < x_data.size(); ++i) x_data[i] = std::cos(1.3f * static_cast<float>(i)) * 4.0f;
  x_data[5] = NAN;  // row 0 becomes all NaN, as softmax makes it
  char* data[] = {reinterpret_cast<char*>(out.data()), reinterpret_cast<char*>(x_data.data())};
  const int64_t strides[] = {cols, 1, cols, 1};
  const int64_t sizes[] = {rows, cols};
  kernel(data, strides, sizes, 2, 1, 0, rows);
  for (int64_t i = 0; i < rows; ++i) {
    double top_ref = -INFINITY, sum = 0;
    for (int64_t j = 0; j < cols; ++j) top_ref = std::max<double>(top_ref, x_data[i * cols + j]);
    for (int64_t j = 0; j < cols; ++j) sum += std::exp(double(x_data[i * cols + j]) - top_ref);
    for (int64_t j = 0; j < cols; ++j) {
      if (i == 0) {
        EXPECT_TRUE(std::isnan(out[j])) << j;
        continue;
      }
      EXPECT_NEAR(out[i * cols + j], std::exp(double(x_data[i * cols + j]) - top_ref) / sum, 1e-6) << i << "," << j;
    }
  }
  dlclose(library);
  std::system((std::string("rm -rf ") + dir).c_str());
}

TEST(Compiler, GeneratedColumnKernelRunsAndMatchesReference) {
  // Folding the outer dim (a bias gradient): per column, the sum of x * w over rows and the max
  // of x, with h = x * w stored too. Called on two blocks of columns, as the launcher splits them.
  cc::Graph g;
  const cc::Shape shape{"s0", "s1"};
  const int x = g.add_input(f32, shape);
  const int w = g.add_input(f32, {"s1"});
  const int h = g.add_pointwise("mul", {value(x), value(w)}, f32, shape, f32);
  const int total = g.add_reduction("sum", h, {0}, false, f32, f32);
  const int top = g.add_reduction("amax", x, {0}, true, f32, f32);
  const int scaled = g.add_pointwise("mul", {value(top), literal(2.0)}, f32, {"1", "s1"}, f32);
  g.mark_output(h);
  g.mark_output(total);
  g.mark_output(scaled);
  const cc::Program p = cc::plan_program(g);
  ASSERT_EQ(p.kernels.size(), 1u);
  EXPECT_EQ(p.kernels[0].reduce_dims, std::vector<int>{0});
  EXPECT_TRUE(cc::folds_outer_dims(p.kernels[0].reduce_dims, 2));
  ASSERT_EQ(p.kernels[0].outputs, (std::vector<int>{h, total, scaled}));
  char dir[] = "/tmp/tn-compiler-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const cc::Artifact built = cc::build_artifact(cc::generate_source(g, p), dir);
  void* library = dlopen(built.path.c_str(), RTLD_NOW);
  ASSERT_NE(library, nullptr) << dlerror();
  auto kernel = reinterpret_cast<cc::ReductionEntry>(dlsym(library, p.kernels[0].symbol.c_str()));
  ASSERT_NE(kernel, nullptr);
  const int64_t rows = 7, cols = 21;
  std::vector<float> x_data(rows * cols), w_data(cols), h_out(rows * cols), total_out(cols), scaled_out(cols);
  for (size_t i = 0; i < x_data.size(); ++i) x_data[i] = std::sin(0.9f * static_cast<float>(i)) * 2.0f;
  for (int64_t j = 0; j < cols; ++j) w_data[j] = 0.25f * static_cast<float>(j) - 1.0f;
  x_data[4 * cols + 3] = NAN;  // column 3's max is NaN
  char* data[] = {reinterpret_cast<char*>(h_out.data()), reinterpret_cast<char*>(total_out.data()),
                  reinterpret_cast<char*>(scaled_out.data()), reinterpret_cast<char*>(x_data.data()),
                  reinterpret_cast<char*>(w_data.data())};
  // Dims as the launcher orders them, kept then folded: [cols, rows]; [operand][dim].
  const int64_t strides[] = {1, cols, 1, 0, 1, 0, 1, cols, 1, 0};
  const int64_t sizes[] = {cols, rows};
  kernel(data, strides, sizes, 2, 1, 0, 13);
  kernel(data, strides, sizes, 2, 1, 13, cols);
  for (int64_t j = 0; j < cols; ++j) {
    double sum = 0;
    float top_ref = -INFINITY;
    bool nan = false;
    for (int64_t i = 0; i < rows; ++i) {
      const float xv = x_data[i * cols + j];
      if (!std::isnan(xv)) {
        EXPECT_FLOAT_EQ(h_out[i * cols + j], xv * w_data[j]) << i << "," << j;
      }
      sum += double(xv * w_data[j]);
      nan = nan || std::isnan(xv);
      top_ref = std::max(top_ref, xv);
    }
    if (nan) {
      EXPECT_TRUE(std::isnan(scaled_out[j])) << j;
    } else {
      EXPECT_NEAR(total_out[j], sum, 1e-5) << j;
      EXPECT_FLOAT_EQ(scaled_out[j], 2.0f * top_ref) << j;
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
  // A failed build leaves nothing behind: no lock, source, log or partial object.
  EXPECT_EQ(std::system((std::string("test -z \"$(ls -A ") + dir + ")\"").c_str()), 0);
  std::system((std::string("rm -rf ") + dir).c_str());
}

namespace {

// A file of `bytes` bytes last modified `age_s` seconds ago.
void write_aged(const std::string& path, size_t bytes, int age_s) {
  std::ofstream(path) << std::string(bytes, 'x');
  timespec times[2];
  clock_gettime(CLOCK_REALTIME, &times[0]);
  times[0].tv_sec -= age_s;
  times[1] = times[0];
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
}

bool file_exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

}  // namespace

TEST(Compiler, TrimCacheEvictsLeastRecentlyUsedAndLeftovers) {
  char dir_template[] = "/tmp/tn-compiler-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  write_aged(dir + "/old.so", 4000, 300);
  write_aged(dir + "/old.cpp", 1000, 300);
  write_aged(dir + "/middle.so", 4000, 200);
  write_aged(dir + "/new.so", 4000, 100);
  write_aged(dir + "/kept.so", 4000, 400);  // the artifact just built: never evicted
  // A killed builder's temporaries (its process is gone) and a lock nobody holds.
  const pid_t gone = fork();
  if (gone == 0) _exit(0);
  waitpid(gone, nullptr, 0);
  write_aged(dir + "/dead." + std::to_string(gone) + ".cpp", 10, 0);
  write_aged(dir + "/dead." + std::to_string(gone) + ".log", 10, 0);
  write_aged(dir + "/dead.lock", 0, 0);
  // A live builder's temporaries stay.
  write_aged(dir + "/live." + std::to_string(getpid()) + ".cpp", 10, 0);

  cc::trim_cache(dir, 100000, "kept");  // under the limit: only the leftovers go
  EXPECT_TRUE(file_exists(dir + "/old.so"));
  EXPECT_FALSE(file_exists(dir + "/dead." + std::to_string(gone) + ".cpp"));
  EXPECT_FALSE(file_exists(dir + "/dead." + std::to_string(gone) + ".log"));
  EXPECT_FALSE(file_exists(dir + "/dead.lock"));
  EXPECT_TRUE(file_exists(dir + "/live." + std::to_string(getpid()) + ".cpp"));

  cc::trim_cache(dir, 14000, "kept");  // 17,010 bytes: down to 80% (11,200) oldest first
  EXPECT_FALSE(file_exists(dir + "/old.so"));
  EXPECT_FALSE(file_exists(dir + "/old.cpp"));
  EXPECT_FALSE(file_exists(dir + "/middle.so"));
  EXPECT_TRUE(file_exists(dir + "/new.so"));
  EXPECT_TRUE(file_exists(dir + "/kept.so"));
  std::system(("rm -rf " + dir).c_str());
}
