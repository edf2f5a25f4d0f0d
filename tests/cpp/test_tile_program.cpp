// Tile programs (the IR NKI kernels trace into) without torch: shape checks when ops are added,
// and generated code compiled, loaded and run against a hand-written reference.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "compiler/artifact.h"
#include "compiler/tile_program.h"

namespace cc = torchneuron::compiler;

namespace {

cc::TileAccess access(int buffer, std::string offset, std::vector<int64_t> sizes, std::vector<int64_t> strides) {
  return cc::TileAccess{buffer, std::move(offset), std::move(sizes), std::move(strides), {}, {}};
}

cc::TileOp copy(cc::TileAccess dst, cc::TileAccess src) {
  cc::TileOp op;
  op.destination = std::move(dst);
  op.sources = {std::move(src)};
  op.expression = {cc::ExpressionNode{"source", {}, 0, 0.0, -1, ""}};
  return op;
}

cc::TileOp matmul(cc::TileAccess dst, cc::TileAccess stationary, cc::TileAccess moving, bool accumulate) {
  cc::TileOp op;
  op.kind = cc::TileOpKind::kMatmul;
  op.destination = std::move(dst);
  op.sources = {std::move(stationary), std::move(moving)};
  op.accumulate = accumulate;
  return op;
}

}  // namespace

TEST(TileProgram, RejectsMalformedOps) {
  cc::TileProgram p;
  const int a = p.add_buffer("a", cc::MemorySpace::kSbuf, cc::DType::kFloat32, 64, -1);
  EXPECT_THROW(p.add(copy(access(a, "0", {8, 8}, {8, 1}), access(a, "0", {8, 4}, {8, 1}))), std::invalid_argument);
  EXPECT_THROW(p.add(matmul(access(a, "0", {4, 4}, {4, 1}), access(a, "0", {8, 4}, {4, 1}), access(a, "0", {6, 4}, {4, 1}),
                            false)),
               std::invalid_argument);
  EXPECT_THROW(p.end_loop(), std::invalid_argument);
  EXPECT_THROW(p.add_buffer("h", cc::MemorySpace::kHbm, cc::DType::kFloat32, 4, -1), std::invalid_argument);
}

// Per program p of a grid of 2: out[p] = x[p]^T y, plus twice more into its first 40 columns
// (a loop of two accumulating products that take the generic path), and half of each row's sum.
TEST(TileProgram, GeneratedProgramRunsAndMatchesReference) {
  const int64_t K = 36, M = 8, N = 64, NARROW = 40;
  cc::TileProgram p;
  p.set_grid({2});
  const int x = p.add_buffer("x", cc::MemorySpace::kHbm, cc::DType::kFloat32, 2 * K * M, 0);
  const int y = p.add_buffer("y", cc::MemorySpace::kHbm, cc::DType::kFloat32, K * N, 1);
  const int out = p.add_buffer("out", cc::MemorySpace::kHbm, cc::DType::kFloat32, 2 * M * N, 2);
  const int sums = p.add_buffer("sums", cc::MemorySpace::kHbm, cc::DType::kFloat32, 2 * M, 3);
  const int st = p.add_buffer("st", cc::MemorySpace::kSbuf, cc::DType::kFloat32, K * M, -1);
  const int mv = p.add_buffer("mv", cc::MemorySpace::kSbuf, cc::DType::kFloat32, K * N, -1);
  const int ps = p.add_buffer("ps", cc::MemorySpace::kPsum, cc::DType::kFloat32, M * N, -1);
  p.add(copy(access(st, "0", {K, M}, {M, 1}), access(x, "(p0 * " + std::to_string(K * M) + ")", {K, M}, {M, 1})));
  p.add(copy(access(mv, "0", {K, N}, {N, 1}), access(y, "0", {K, N}, {N, 1})));
  p.add(matmul(access(ps, "0", {M, N}, {N, 1}), access(st, "0", {K, M}, {M, 1}), access(mv, "0", {K, N}, {N, 1}), false));
  p.begin_loop("2");
  p.add(matmul(access(ps, "0", {M, NARROW}, {N, 1}), access(st, "0", {K, M}, {M, 1}), access(mv, "0", {K, NARROW}, {N, 1}),
               true));
  p.end_loop();
  p.add(copy(access(out, "(p0 * " + std::to_string(M * N) + ")", {M, N}, {N, 1}), access(ps, "0", {M, N}, {N, 1})));
  cc::TileOp reduce;
  reduce.kind = cc::TileOpKind::kReduce;
  reduce.destination = access(sums, "(p0 * " + std::to_string(M) + ")", {M, 1}, {1, 0});
  reduce.sources = {access(ps, "0", {M, N}, {N, 1})};
  reduce.expression = {cc::ExpressionNode{"source", {}, 0, 0.0, -1, ""}};
  reduce.reduce_op = "add";
  reduce.reduce_dims = {1};
  reduce.scale = 0.5;
  p.add(reduce);
  EXPECT_EQ(p.programs(), 2);

  char dir[] = "/tmp/tn-tile-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const cc::Artifact built = cc::build_artifact(cc::generate_tile_source(p, "tile_test"), dir);
  void* library = dlopen(built.path.c_str(), RTLD_NOW);
  ASSERT_NE(library, nullptr) << dlerror();
  auto entry = reinterpret_cast<cc::TileProgramEntry>(dlsym(library, "tile_test"));
  ASSERT_NE(entry, nullptr);
  std::vector<float> xs(2 * K * M), ys(K * N), outs(2 * M * N, -1.0f), sum_out(2 * M, -1.0f);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(i % 7) - 3.0f;
  for (size_t i = 0; i < ys.size(); ++i) ys[i] = static_cast<float>(i % 5) * 0.5f - 1.0f;
  char* tensors[] = {reinterpret_cast<char*>(xs.data()), reinterpret_cast<char*>(ys.data()),
                     reinterpret_cast<char*>(outs.data()), reinterpret_cast<char*>(sum_out.data())};
  int64_t fault = 0;
  entry(tensors, 1, 2, &fault);  // programs run in any split
  entry(tensors, 0, 1, &fault);
  EXPECT_EQ(fault, 0);
  for (int64_t g = 0; g < 2; ++g) {
    for (int64_t m = 0; m < M; ++m) {
      double row = 0;
      for (int64_t n = 0; n < N; ++n) {
        double product = 0;
        for (int64_t k = 0; k < K; ++k) product += xs[g * K * M + k * M + m] * ys[k * N + n];
        const double expected = n < NARROW ? 3 * product : product;
        EXPECT_NEAR(outs[g * M * N + m * N + n], expected, 1e-3) << g << " " << m << " " << n;
        row += expected;
      }
      EXPECT_NEAR(sum_out[g * M + m], 0.5 * row, 1e-2);
    }
  }
  dlclose(library);
  std::system((std::string("rm -rf ") + dir).c_str());
}

// A program in two segments (symbol_s0, symbol_s1) keeps its on-chip tile in the external scratch
// between them: the host changes the tile in between (as a collective would) and the second
// segment stores what the host left.
TEST(TileProgram, SegmentsShareTheExternalScratch) {
  const int64_t N = 24;
  cc::TileProgram p;
  const int x = p.add_buffer("x", cc::MemorySpace::kHbm, cc::DType::kFloat32, N, 0);
  const int out = p.add_buffer("out", cc::MemorySpace::kHbm, cc::DType::kFloat32, N, 1);
  const int t = p.add_buffer("t", cc::MemorySpace::kSbuf, cc::DType::kFloat32, N, -1);
  p.add(copy(access(t, "0", {N}, {1}), access(x, "0", {N}, {1})));
  p.begin_loop("1");
  EXPECT_THROW(p.cut(), std::invalid_argument);  // only outside loops
  p.end_loop();
  p.cut();
  p.add(copy(access(out, "0", {N}, {1}), access(t, "0", {N}, {1})));
  EXPECT_EQ(p.segments(), 2);
  EXPECT_THROW(cc::generate_tile_source(p, "segments"), std::invalid_argument);  // needs external scratch
  p.set_external_scratch(2);
  p.set_grid({2});
  EXPECT_THROW(cc::generate_tile_source(p, "segments"), std::invalid_argument);  // one program only
  p.set_grid({1});

  char dir[] = "/tmp/tn-tile-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const cc::Artifact built = cc::build_artifact(cc::generate_tile_source(p, "segments"), dir);
  void* library = dlopen(built.path.c_str(), RTLD_NOW);
  ASSERT_NE(library, nullptr) << dlerror();
  auto first = reinterpret_cast<cc::TileProgramEntry>(dlsym(library, "segments_s0"));
  auto second = reinterpret_cast<cc::TileProgramEntry>(dlsym(library, "segments_s1"));
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  std::vector<float> xs(N), outs(N, -1.0f), scratch(p.scratch_floats() + 16, 0.0f);
  for (int64_t i = 0; i < N; ++i) xs[i] = static_cast<float>(i) * 0.25f;
  char* tensors[] = {reinterpret_cast<char*>(xs.data()), reinterpret_cast<char*>(outs.data()),
                     reinterpret_cast<char*>(scratch.data())};
  int64_t fault = 0;
  first(tensors, 0, 1, &fault);
  const size_t align = (16 - reinterpret_cast<uintptr_t>(scratch.data()) / 4 % 16) % 16;  // as generated code aligns
  for (int64_t i = 0; i < N; ++i) {
    EXPECT_EQ(scratch[align + p.buffers()[t].scratch_offset + i], xs[i]);
    scratch[align + p.buffers()[t].scratch_offset + i] += 100.0f;
  }
  second(tensors, 0, 1, &fault);
  EXPECT_EQ(fault, 0);
  for (int64_t i = 0; i < N; ++i) EXPECT_EQ(outs[i], xs[i] + 100.0f) << i;
  dlclose(library);
  std::system((std::string("rm -rf ") + dir).c_str());
}
