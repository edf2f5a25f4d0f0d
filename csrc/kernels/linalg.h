// Dense linear algebra over contiguous row-major batches: triangular solves.
#pragma once

#include <cstdint>

#include "kernels/strided.h"

namespace torchneuron::kernels {

// Solves A X = B in place of B for each of `batch` pairs: A [batch, n, n] lower (or upper)
// triangular, only that triangle read (its diagonal taken as ones when `unitriangular`);
// B / X [batch, n, k]. Substitution row by row, each row's sums over the earlier solved rows
// in order of j; floating dtypes (half types compute in float).
void triangular_solve(DType dtype, int64_t batch, int64_t n, int64_t k, bool upper, bool unitriangular,
                      const void* a, void* b);

}  // namespace torchneuron::kernels
