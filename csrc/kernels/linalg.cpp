#include "kernels/linalg.h"

#include <algorithm>
#include <vector>

#include "kernels/floating.h"
#include "kernels/parallel.h"

namespace torchneuron::kernels {

// Tasks are (matrix, block of columns of B): columns are independent systems.
void triangular_solve(DType dtype, int64_t batch, int64_t n, int64_t k, bool upper, bool unitriangular, const void* a,
                      void* b) {
  dispatch_floating(dtype, "triangular_solve", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* matrices = static_cast<const T*>(a);
    T* rhs = static_cast<T*>(b);
    constexpr int64_t kColumns = 64;
    const int64_t blocks = (k + kColumns - 1) / kColumns;
    const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, n * n * std::min(k, kColumns)));
    parallel_for(batch * blocks, grain, [&](int64_t begin, int64_t end) {
      std::vector<A> solved(static_cast<size_t>(n * kColumns));  // X's rows for this block, in A's precision
      std::vector<A> row(kColumns);
      for (int64_t task = begin; task < end; ++task) {
        const int64_t m = task / blocks, c0 = (task % blocks) * kColumns, width = std::min(kColumns, k - c0);
        const T* mat = matrices + m * n * n;
        T* x = rhs + m * n * k + c0;
        for (int64_t step = 0; step < n; ++step) {
          const int64_t i = upper ? n - 1 - step : step;
          for (int64_t c = 0; c < width; ++c) row[c] = up(x[i * k + c]);
          // The solved rows j: below i when upper, above it when lower, taken in increasing j.
          const int64_t j0 = upper ? i + 1 : 0, j1 = upper ? n : i;
          for (int64_t j = j0; j < j1; ++j) {
            const A aij = up(mat[i * n + j]);
            const A* xj = solved.data() + j * kColumns;
            for (int64_t c = 0; c < width; ++c) row[c] -= aij * xj[c];
          }
          A* xi = solved.data() + i * kColumns;
          if (unitriangular) {
            for (int64_t c = 0; c < width; ++c) xi[c] = row[c];
          } else {
            const A diagonal = up(mat[i * n + i]);
            for (int64_t c = 0; c < width; ++c) xi[c] = row[c] / diagonal;
          }
          for (int64_t c = 0; c < width; ++c) x[i * k + c] = down<T>(xi[c]);
        }
      }
    });
  });
}

}  // namespace torchneuron::kernels
