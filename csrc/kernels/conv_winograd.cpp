#include "kernels/conv_common.h"

#include <algorithm>
#include <vector>

#include "kernels/parallel.h"
#include "kernels/tile_gemm.h"

namespace torchneuron::kernels::conv_detail {

// ---- Winograd F(2x2, 3x3): 3x3 convolutions with stride 1 and no dilation ------------------
// Each 2x2 block of outputs (a tile) comes from a 4x4 input patch d: Y = A^T [U . V] A with
// U = G g G^T per filter and V = B^T d B per patch, 16 multiplies per channel pair instead of
// 36; the element-wise products summed over input channels are 16 GEMMs. The transforms run
// over a whole row of tiles at a time, so that they vectorize.

bool use_winograd(const Conv2dShape& s) {
  const int64_t cin_g = s.in_channels / s.groups, cout_g = s.out_channels / s.groups;
  // Few channels make the GEMMs too shallow, and few tiles too narrow (an 8x8 output with 128
  // channels ran 3.4 times slower than im2col), for the transforms to pay off.
  const int64_t tiles_w = ceil_div(s.out_w(), 2), tiles = ceil_div(s.out_h(), 2) * tiles_w;
  return s.kernel_h == 3 && s.kernel_w == 3 && s.stride_h == 1 && s.stride_w == 1 && s.dilation_h == 1 &&
         s.dilation_w == 1 && cin_g >= 8 && cout_g >= 8 && tiles_w >= 4 && tiles >= 32;
}

namespace {

// u[16] = G g G^T for one 3x3 filter g, G = [[1, 0, 0], [.5, .5, .5], [.5, -.5, .5], [0, 0, 1]].
void winograd_filter(const float* g, float* u) {
  float t[4][3];
  for (int c = 0; c < 3; ++c) {
    t[0][c] = g[c];
    t[1][c] = 0.5f * (g[c] + g[3 + c] + g[6 + c]);
    t[2][c] = 0.5f * (g[c] - g[3 + c] + g[6 + c]);
    t[3][c] = g[6 + c];
  }
  for (int r = 0; r < 4; ++r) {
    u[r * 4 + 0] = t[r][0];
    u[r * 4 + 1] = 0.5f * (t[r][0] + t[r][1] + t[r][2]);
    u[r * 4 + 2] = 0.5f * (t[r][0] - t[r][1] + t[r][2]);
    u[r * 4 + 3] = t[r][2];
  }
}

// B^T d B for the tiles of one tile row of one channel, written to v[xi * v_stride + k] for tile k.
// even[r] and odd[r] (r < 4) are patch row r's input row split by column parity, zero-padded:
// tile k's patch columns are even[k], odd[k], even[k + 1], odd[k + 1] (split beforehand, the
// overlapping stride-2 reads would not vectorize).
// B^T = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]].
// One loop over the tiles does the whole transform: rows of tiles are short (16 for a 32-wide
// output), so loop overhead, not arithmetic, decided the cost of split loops.
void winograd_input_row(const float* const (&even)[4], const float* const (&odd)[4], int64_t tiles,
                        float* __restrict v, int64_t v_stride) {
  const float* __restrict e0 = even[0];
  const float* __restrict e1 = even[1];
  const float* __restrict e2 = even[2];
  const float* __restrict e3 = even[3];
  const float* __restrict o0 = odd[0];
  const float* __restrict o1 = odd[1];
  const float* __restrict o2 = odd[2];
  const float* __restrict o3 = odd[3];
  float* __restrict v0 = v;
  float* __restrict v1 = v + v_stride;
  float* __restrict v2 = v + 2 * v_stride;
  float* __restrict v3 = v + 3 * v_stride;
  float* __restrict v4 = v + 4 * v_stride;
  float* __restrict v5 = v + 5 * v_stride;
  float* __restrict v6 = v + 6 * v_stride;
  float* __restrict v7 = v + 7 * v_stride;
  float* __restrict v8 = v + 8 * v_stride;
  float* __restrict v9 = v + 9 * v_stride;
  float* __restrict v10 = v + 10 * v_stride;
  float* __restrict v11 = v + 11 * v_stride;
  float* __restrict v12 = v + 12 * v_stride;
  float* __restrict v13 = v + 13 * v_stride;
  float* __restrict v14 = v + 14 * v_stride;
  float* __restrict v15 = v + 15 * v_stride;
#pragma GCC ivdep  // the 16 outputs never overlap the inputs or each other
  for (int64_t k = 0; k < tiles; ++k) {
    // d B: the patch columns (a, b, c, d) combined, per patch row.
    const float a0 = e0[k], b0 = o0[k], c0 = e0[k + 1], d0 = o0[k + 1];
    const float a1 = e1[k], b1 = o1[k], c1 = e1[k + 1], d1 = o1[k + 1];
    const float a2 = e2[k], b2 = o2[k], c2 = e2[k + 1], d2 = o2[k + 1];
    const float a3 = e3[k], b3 = o3[k], c3 = e3[k + 1], d3 = o3[k + 1];
    const float q00 = a0 - c0, q01 = b0 + c0, q02 = c0 - b0, q03 = b0 - d0;
    const float q10 = a1 - c1, q11 = b1 + c1, q12 = c1 - b1, q13 = b1 - d1;
    const float q20 = a2 - c2, q21 = b2 + c2, q22 = c2 - b2, q23 = b2 - d2;
    const float q30 = a3 - c3, q31 = b3 + c3, q32 = c3 - b3, q33 = b3 - d3;
    // B^T (d B): the patch rows combined; position xi = 4 * row + column.
    v0[k] = q00 - q20;
    v1[k] = q01 - q21;
    v2[k] = q02 - q22;
    v3[k] = q03 - q23;
    v4[k] = q10 + q20;
    v5[k] = q11 + q21;
    v6[k] = q12 + q22;
    v7[k] = q13 + q23;
    v8[k] = q20 - q10;
    v9[k] = q21 - q11;
    v10[k] = q22 - q12;
    v11[k] = q23 - q13;
    v12[k] = q10 - q30;
    v13[k] = q11 - q31;
    v14[k] = q12 - q32;
    v15[k] = q13 - q33;
  }
}

// A^T m A for the tiles of one tile row of one output channel: m[xi * m_stride + k] are tile k's
// 16 products; writes the two output rows row0 and row1 (a scratch row when the output has an
// odd height and this is its last tile row) plus the bias. A^T = [[1, 1, 1, 0], [0, 1, -1, -1]].
void winograd_output_row(const float* __restrict m, int64_t m_stride, int64_t tiles, float bias,
                         float* __restrict row0, float* __restrict row1, int64_t out_w) {
  const int64_t pairs = out_w / 2;  // tiles whose two columns are both inside the output
#pragma GCC ivdep  // the products and the two output rows never overlap
  for (int64_t k = 0; k < tiles; ++k) {
    const float m0 = m[k], m1 = m[m_stride + k], m2 = m[2 * m_stride + k], m3 = m[3 * m_stride + k];
    const float m4 = m[4 * m_stride + k], m5 = m[5 * m_stride + k], m6 = m[6 * m_stride + k];
    const float m7 = m[7 * m_stride + k], m8 = m[8 * m_stride + k], m9 = m[9 * m_stride + k];
    const float m10 = m[10 * m_stride + k], m11 = m[11 * m_stride + k], m12 = m[12 * m_stride + k];
    const float m13 = m[13 * m_stride + k], m14 = m[14 * m_stride + k], m15 = m[15 * m_stride + k];
    // A^T m: the product rows combined (column c of rows 0..3 is m[c], m[4 + c], m[8 + c], m[12 + c]).
    const float t00 = m0 + m4 + m8, t01 = m1 + m5 + m9, t02 = m2 + m6 + m10, t03 = m3 + m7 + m11;
    const float t10 = m4 - m8 - m12, t11 = m5 - m9 - m13, t12 = m6 - m10 - m14, t13 = m7 - m11 - m15;
    // (A^T m) A: the columns combined.
    const float y00 = t00 + t01 + t02 + bias, y01 = t01 - t02 - t03 + bias;
    const float y10 = t10 + t11 + t12 + bias, y11 = t11 - t12 - t13 + bias;
    if (k < pairs) {
      row1[2 * k] = y10;
      row1[2 * k + 1] = y11;
      row0[2 * k] = y00;
      row0[2 * k + 1] = y01;
    } else {  // an odd output width: the last tile's first column only
      row1[2 * k] = y10;
      row0[2 * k] = y00;
    }
  }
}

}  // namespace

void conv2d_forward_winograd(const Conv2dShape& s, const float* input, const float* weight, const float* bias,
                             float* out) {
  const int64_t cin_g = s.in_channels / s.groups, cout_g = s.out_channels / s.groups;
  const int64_t oh = s.out_h(), ow = s.out_w(), spatial = oh * ow;
  const int64_t tiles_h = ceil_div(oh, 2), tiles_w = ceil_div(ow, 2);
  // u[g][xi][co][ci]: the transformed filters, one cout_g x cin_g matrix per position xi.
  std::vector<float> u(static_cast<size_t>(s.groups * 16 * cout_g * cin_g));
  for (int64_t oc = 0; oc < s.out_channels; ++oc) {
    const int64_t g = oc / cout_g, co = oc % cout_g;
    for (int64_t ci = 0; ci < cin_g; ++ci) {
      float filter[16];
      winograd_filter(weight + (oc * cin_g + ci) * 9, filter);
      for (int xi = 0; xi < 16; ++xi) u[((g * 16 + xi) * cout_g + co) * cin_g + ci] = filter[xi];
    }
  }
  // Jobs own blocks of tile rows of one (image, group), about 64 tiles each, so that the
  // transformed inputs and the products stay in L2.
  const int64_t rows_per_block = std::clamp<int64_t>(64 / tiles_w, 1, tiles_h);
  const int64_t blocks = ceil_div(tiles_h, rows_per_block), planes = s.batch * s.groups;
  const int64_t padded_w = 2 * tiles_w + 2;
  parallel_for(planes * blocks, 1, [&](int64_t begin, int64_t end) {
    const int64_t max_tiles = rows_per_block * tiles_w;
    std::vector<float> v(static_cast<size_t>(16 * cin_g * max_tiles)), m(static_cast<size_t>(16 * cout_g * max_tiles));
    // The job's input rows, zero-padded, then split by column parity (row i: even then odd).
    // All rows are padded before any is split: reading a row right after its copy stalled on
    // store forwarding.
    const int64_t half = tiles_w + 1, max_rows = 2 * rows_per_block + 2;
    std::vector<float> padded(static_cast<size_t>(max_rows * padded_w)), split(static_cast<size_t>(max_rows * 2 * half));
    std::vector<float> scratch(static_cast<size_t>(ow));  // the row below an odd-height output
    for (int64_t job = begin; job < end; ++job) {
      const int64_t plane = job / blocks, n = plane / s.groups, g = plane % s.groups;
      const int64_t ty_begin = (job % blocks) * rows_per_block, ty_end = std::min(tiles_h, ty_begin + rows_per_block);
      const int64_t width = (ty_end - ty_begin) * tiles_w;  // tiles in this job: the GEMMs' N
      const float* image = input + (n * s.in_channels + g * cin_g) * s.height * s.width;
      const int64_t first = std::max<int64_t>(0, s.pad_w), last = std::min(padded_w, s.width + s.pad_w);
      const int64_t input_rows = 2 * (ty_end - ty_begin) + 2;
      for (int64_t ci = 0; ci < cin_g; ++ci) {
        const float* channel = image + ci * s.height * s.width;
        std::fill(padded.begin(), padded.begin() + input_rows * padded_w, 0.0f);
        for (int64_t i = 0; i < input_rows; ++i) {  // padded row i: channel row y at columns j - pad_w
          const int64_t y = 2 * ty_begin - s.pad_h + i;
          if (y >= 0 && y < s.height && last > first) {
            std::copy(channel + y * s.width + first - s.pad_w, channel + y * s.width + last - s.pad_w,
                      padded.begin() + i * padded_w + first);
          }
        }
        for (int64_t i = 0; i < input_rows; ++i) {
          const float* __restrict row = padded.data() + i * padded_w;
          float* __restrict even = split.data() + i * 2 * half;
          float* __restrict odd = even + half;
          for (int64_t j = 0; j < half; ++j) {
            even[j] = row[2 * j];
            odd[j] = row[2 * j + 1];
          }
        }
        for (int64_t ty = ty_begin; ty < ty_end; ++ty) {
          const float* base = split.data() + 2 * (ty - ty_begin) * 2 * half;
          const float* even[4] = {base, base + 2 * half, base + 4 * half, base + 6 * half};
          const float* odd[4] = {base + half, base + 3 * half, base + 5 * half, base + 7 * half};
          winograd_input_row(even, odd, tiles_w, v.data() + ci * width + (ty - ty_begin) * tiles_w, cin_g * width);
        }
      }
      for (int xi = 0; xi < 16; ++xi) {
        multiply_into(cout_g, width, cin_g, u.data() + (g * 16 + xi) * cout_g * cin_g, cin_g, int64_t{1},
                      v.data() + xi * cin_g * width, width, m.data() + xi * cout_g * width, width);
      }
      for (int64_t co = 0; co < cout_g; ++co) {
        const int64_t oc = g * cout_g + co;
        float* dst = out + (n * s.out_channels + oc) * spatial;
        for (int64_t ty = ty_begin; ty < ty_end; ++ty) {
          float* row0 = dst + 2 * ty * ow;
          float* row1 = 2 * ty + 1 < oh ? row0 + ow : scratch.data();
          winograd_output_row(m.data() + co * width + (ty - ty_begin) * tiles_w, cout_g * width, tiles_w,
                              bias != nullptr ? bias[oc] : 0.0f, row0, row1, ow);
        }
      }
    }
  });
}

}  // namespace torchneuron::kernels::conv_detail
