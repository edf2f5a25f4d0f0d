#include "kernels/conv.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "kernels/parallel.h"
#include "kernels/tile_gemm.h"

namespace torchneuron::kernels {
namespace {

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Output columns [x_begin, x_end) whose input column x * stride - pad + j * dilation is inside
// the image (x_begin <= x_end).
struct ColumnRange {
  int64_t offset, x_begin, x_end;
};
inline ColumnRange column_range(const Conv2dShape& s, int64_t j) {
  const int64_t offset = j * s.dilation_w - s.pad_w;  // input column of output column 0
  const int64_t ow = s.out_w();
  const int64_t begin = std::min(ow, offset >= 0 ? int64_t{0} : ceil_div(-offset, s.stride_w));
  const int64_t end = s.width - offset > 0 ? std::min(ow, ceil_div(s.width - offset, s.stride_w)) : int64_t{0};
  return {offset, begin, std::max(begin, end)};
}

// One row of the column matrix for output rows [y_begin, y_end):
// row[(y - y_begin) * out_w + x] = plane[y*sh - ph + i*dh][x*sw - pw + j*dw], zero outside the image.
void im2col_row(const Conv2dShape& s, const float* plane, int64_t i, int64_t j, int64_t y_begin, int64_t y_end,
                float* row) {
  const int64_t ow = s.out_w();
  const ColumnRange cr = column_range(s, j);
  for (int64_t y = y_begin; y < y_end; ++y) {
    float* dst = row + (y - y_begin) * ow;
    const int64_t in_y = y * s.stride_h - s.pad_h + i * s.dilation_h;
    if (in_y < 0 || in_y >= s.height) {
      std::fill(dst, dst + ow, 0.0f);
      continue;
    }
    const float* src = plane + in_y * s.width;  // input column x * stride_w + offset
    std::fill(dst, dst + cr.x_begin, 0.0f);
    if (s.stride_w == 1) {
      std::copy(src + cr.x_begin + cr.offset, src + cr.x_end + cr.offset, dst + cr.x_begin);
    } else {
      for (int64_t x = cr.x_begin; x < cr.x_end; ++x) dst[x] = src[x * s.stride_w + cr.offset];
    }
    std::fill(dst + cr.x_end, dst + ow, 0.0f);
  }
}

// columns[(c * kh + i) * kw + j][...] for the channels of `image` and output rows [y_begin, y_end).
void im2col(const Conv2dShape& s, const float* image, int64_t channels, int64_t y_begin, int64_t y_end,
            float* columns) {
  const int64_t width = (y_end - y_begin) * s.out_w();
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t i = 0; i < s.kernel_h; ++i) {
      for (int64_t j = 0; j < s.kernel_w; ++j) {
        im2col_row(s, image + c * s.height * s.width, i, j, y_begin, y_end,
                   columns + ((c * s.kernel_h + i) * s.kernel_w + j) * width);
      }
    }
  }
}

// The adjoint of im2col for one channel: adds its kh * kw column rows back into `plane`, in the
// order (i, j, y, x).
void col2im_channel(const Conv2dShape& s, const float* columns, float* plane) {
  const int64_t oh = s.out_h(), ow = s.out_w();
  for (int64_t i = 0; i < s.kernel_h; ++i) {
    for (int64_t j = 0; j < s.kernel_w; ++j) {
      const float* row = columns + (i * s.kernel_w + j) * oh * ow;
      const ColumnRange cr = column_range(s, j);
      for (int64_t y = 0; y < oh; ++y) {
        const int64_t in_y = y * s.stride_h - s.pad_h + i * s.dilation_h;
        if (in_y < 0 || in_y >= s.height) continue;
        float* dst = plane + in_y * s.width;  // input column x * stride_w + offset
        const float* src = row + y * ow;
        if (s.stride_w == 1) {
          for (int64_t x = cr.x_begin; x < cr.x_end; ++x) dst[x + cr.offset] += src[x];
        } else {
          for (int64_t x = cr.x_begin; x < cr.x_end; ++x) dst[x * s.stride_w + cr.offset] += src[x];
        }
      }
    }
  }
}

// Jobs of about this many multiply-adds at least, and some per thread when there is work.
constexpr int64_t kMinJobWork = 1 << 18;
// Row blocks in multiples of the multiply's row tile where there is a choice.
constexpr int64_t kTileRows = 8;
// grad_weight sums this many products in float before adding them up in double.
constexpr int64_t kSumRun = 256;

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

}  // namespace

// Each job computes the output rows [y_begin, y_end) of one (image, group): im2col of those
// rows, then out = weight x columns. Every output element is the same sum in the same order
// however the jobs are cut.
namespace {

// Depthwise convolutions (one input and one output channel per group) computed directly: as
// im2col + GEMM every (image, channel) was a product of one row. The zero-padded plane is split
// into stride_h x stride_w phase planes (phase (r, q) holds padded rows r + stride_h * yy and
// columns q + stride_w * xx), so that each tap reads one phase plane at a fixed offset: output
// (y, x) of tap (i, j) reads phase ((i dh) % sh, (j dw) % sw) at row y + (i dh) / sh, column
// x + (j dw) / sw. Each tap is then one long loop over the output laid out in the phase width
// (rows of a small image, looped one by one, were too short to vectorize well); the columns past
// the output width are computed and dropped. Stride 1 is a single phase plane: the padded plane.
struct DepthwisePlan {
  int64_t oh, ow, phase_h, phase_w, phase_size, extended;

  explicit DepthwisePlan(const Conv2dShape& s)
      : oh(s.out_h()), ow(s.out_w()), phase_h(ceil_div(s.height + 2 * s.pad_h, s.stride_h)),
        phase_w(ceil_div(s.width + 2 * s.pad_w, s.stride_w)),
        // Reads run past the last phase row by up to the widest tap's column offset, into zeros.
        phase_size(phase_h * phase_w + (s.kernel_w - 1) * s.dilation_w / s.stride_w), extended(oh * phase_w) {}

  int64_t planes_size(const Conv2dShape& s) const { return s.stride_h * s.stride_w * phase_size; }

  // Tap (i, j)'s view of the phase planes: element k of the extended output reads view[k].
  template <typename F>
  F* tap(const Conv2dShape& s, F* phases, int64_t i, int64_t j) const {
    const int64_t row = i * s.dilation_h, col = j * s.dilation_w;
    const int64_t phase = (row % s.stride_h) * s.stride_w + col % s.stride_w;
    return phases + phase * phase_size + (row / s.stride_h) * phase_w + col / s.stride_w;
  }

  // Calls body(phase, yy, y, first, last) for each phase row yy and its image row y (-1 when
  // outside the image): phase columns [first, last) hold image columns q + sw xx - pad_w.
  template <typename Body>
  void for_each_phase_row(const Conv2dShape& s, Body body) const {
    for (int64_t r = 0; r < s.stride_h; ++r) {
      for (int64_t q = 0; q < s.stride_w; ++q) {
        const int64_t first = s.pad_w > q ? ceil_div(s.pad_w - q, s.stride_w) : 0;
        const int64_t last = std::clamp<int64_t>(ceil_div(s.width + s.pad_w - q, s.stride_w), first, phase_w);
        for (int64_t yy = 0; yy < phase_h; ++yy) {
          const int64_t y = r + s.stride_h * yy - s.pad_h;
          body(r * s.stride_w + q, q, yy, y >= 0 && y < s.height ? y : -1, first, last);
        }
      }
    }
  }

  // Splits one zero-padded image plane into `phases` (planes_size(s) floats, every one written).
  void split(const Conv2dShape& s, const float* image, float* phases) const {
    std::fill(phases, phases + planes_size(s), 0.0f);
    for_each_phase_row(s, [&](int64_t phase, int64_t q, int64_t yy, int64_t y, int64_t first, int64_t last) {
      if (y < 0 || last <= first) return;
      float* row = phases + phase * phase_size + yy * phase_w;
      const float* from = image + y * s.width + q - s.pad_w + s.stride_w * first;
      with_constant_step(s.stride_w, [&](auto step) {
        for (int64_t xx = 0; xx < last - first; ++xx) row[first + xx] = from[step() * xx];
      });
    });
  }

  // The adjoint of split: each image element takes the phase element it was copied to.
  void merge(const Conv2dShape& s, const float* phases, float* image) const {
    for_each_phase_row(s, [&](int64_t phase, int64_t q, int64_t yy, int64_t y, int64_t first, int64_t last) {
      if (y < 0 || last <= first) return;
      const float* row = phases + phase * phase_size + yy * phase_w;
      float* to = image + y * s.width + q - s.pad_w + s.stride_w * first;
      with_constant_step(s.stride_w, [&](auto step) {
        for (int64_t xx = 0; xx < last - first; ++xx) to[step() * xx] = row[first + xx];
      });
    });
  }

  // Calls body with the step as a compile-time constant for strides 1 and 2: the strided copies
  // through a run-time step were scalar loops, most of a stride-2 forward's time.
  template <typename Body>
  static void with_constant_step(int64_t step, Body body) {
    if (step == 1) return body([] { return int64_t{1}; });
    if (step == 2) return body([] { return int64_t{2}; });
    body([step] { return step; });
  }
};

bool is_depthwise(const Conv2dShape& s) {
  return s.groups == s.in_channels && s.groups == s.out_channels && s.batch * s.out_channels > 0 && s.out_h() > 0 &&
         s.out_w() > 0;
}

// Each output sums its taps in the GEMM's k order, from zero, then adds the bias, so the results
// equal the GEMM path's.
void conv2d_forward_depthwise(const Conv2dShape& s, const float* input, const float* weight, const float* bias,
                              float* out) {
  const DepthwisePlan plan(s);
  const int64_t taps = s.kernel_h * s.kernel_w, planes = s.batch * s.out_channels;
  parallel_for(planes, std::max<int64_t>(1, kMinJobWork / std::max<int64_t>(1, plan.extended * taps)), [&](int64_t begin, int64_t end) {
    std::vector<float> phases(static_cast<size_t>(plan.planes_size(s))), sums(static_cast<size_t>(plan.extended));
    for (int64_t plane = begin; plane < end; ++plane) {
      const int64_t c = plane % s.out_channels;
      plan.split(s, input + plane * s.height * s.width, phases.data());
      float* __restrict acc = sums.data();
      std::fill(acc, acc + plan.extended, 0.0f);
      for (int64_t i = 0; i < s.kernel_h; ++i) {
        for (int64_t j = 0; j < s.kernel_w; ++j) {
          const float w = weight[c * taps + i * s.kernel_w + j];
          const float* __restrict shifted = plan.tap(s, static_cast<const float*>(phases.data()), i, j);
          for (int64_t k = 0; k < plan.extended; ++k) acc[k] += w * shifted[k];
        }
      }
      const float b = bias != nullptr ? bias[c] : 0.0f;
      for (int64_t y = 0; y < plan.oh; ++y) {
        float* row = out + (plane * plan.oh + y) * plan.ow;
        const float* from = acc + y * plan.phase_w;
        if (bias != nullptr) {
          for (int64_t x = 0; x < plan.ow; ++x) row[x] = from[x] + b;
        } else {
          std::copy(from, from + plan.ow, row);
        }
      }
    }
  });
}

}  // namespace

void conv2d_forward(const Conv2dShape& s, const float* input, const float* weight, const float* bias, float* out) {
  if (use_winograd(s)) return conv2d_forward_winograd(s, input, weight, bias, out);
  if (is_depthwise(s)) return conv2d_forward_depthwise(s, input, weight, bias, out);
  const int64_t cin_g = s.in_channels / s.groups, cout_g = s.out_channels / s.groups;
  const int64_t oh = s.out_h(), ow = s.out_w(), spatial = oh * ow;
  const int64_t patch = cin_g * s.kernel_h * s.kernel_w;
  const int64_t planes = s.batch * s.groups;
  if (planes == 0 || spatial == 0 || cout_g == 0) return;
  const int64_t row_work = std::max<int64_t>(1, cout_g * patch * ow);
  const int64_t wanted_jobs = std::max<int64_t>(1, 4 * compute_threads() / planes);
  const int64_t y_block = std::clamp<int64_t>(std::max(ceil_div(oh, wanted_jobs), ceil_div(kMinJobWork, row_work)), 1, oh);
  const int64_t y_blocks = ceil_div(oh, y_block);
  parallel_for(planes * y_blocks, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> columns;
    for (int64_t job = begin; job < end; ++job) {
      const int64_t plane = job / y_blocks, n = plane / s.groups, g = plane % s.groups;
      const int64_t y_begin = (job % y_blocks) * y_block, y_end = std::min(oh, y_begin + y_block);
      const int64_t width = (y_end - y_begin) * ow;
      columns.resize(static_cast<size_t>(patch * width));
      im2col(s, input + (n * s.in_channels + g * cin_g) * s.height * s.width, cin_g, y_begin, y_end, columns.data());
      float* dst = out + (n * s.out_channels + g * cout_g) * spatial + y_begin * ow;
      multiply_into(cout_g, width, patch, weight + g * cout_g * patch, patch, int64_t{1}, columns.data(), width, dst,
                    spatial);
      if (bias != nullptr) {
        for (int64_t c = 0; c < cout_g; ++c) {
          const float b = bias[g * cout_g + c];
          float* row = dst + c * spatial;
          for (int64_t k = 0; k < width; ++k) row[k] += b;
        }
      }
    }
  });
}

namespace {

// The shape of the convolution that computes a stride-1 convolution's input gradient: over
// grad_out, with padding dilation * (kernel - 1) - padding and the channel counts swapped; its
// output has the input's size. None when that padding would be negative.
std::optional<Conv2dShape> input_grad_convolution(const Conv2dShape& s) {
  const int64_t pad_h = s.dilation_h * (s.kernel_h - 1) - s.pad_h, pad_w = s.dilation_w * (s.kernel_w - 1) - s.pad_w;
  if (s.stride_h != 1 || s.stride_w != 1 || pad_h < 0 || pad_w < 0) return std::nullopt;
  Conv2dShape t = s;
  t.in_channels = s.out_channels;
  t.out_channels = s.in_channels;
  t.height = s.out_h();
  t.width = s.out_w();
  t.pad_h = pad_h;
  t.pad_w = pad_w;
  return t;
}

// grad_input = the convolution `t` of grad_out with each filter flipped and its input and output
// channels swapped: the forward's path (Winograd for 3x3 filters), rather than a product and a
// scatter-add of its columns (col2im), which ran at half the speed.
void input_grad_by_convolution(const Conv2dShape& s, const Conv2dShape& t, const float* grad_out, const float* weight,
                               float* grad_input) {
  const int64_t cin_g = s.in_channels / s.groups, cout_g = s.out_channels / s.groups;
  const int64_t kh = s.kernel_h, kw = s.kernel_w, taps = kh * kw;
  std::vector<float> flipped(static_cast<size_t>(s.out_channels * cin_g * taps));
  for (int64_t g = 0; g < s.groups; ++g) {
    for (int64_t ci = 0; ci < cin_g; ++ci) {
      for (int64_t co = 0; co < cout_g; ++co) {
        const float* from = weight + ((g * cout_g + co) * cin_g + ci) * taps;
        float* to = flipped.data() + ((g * cin_g + ci) * cout_g + co) * taps;
        for (int64_t tap = 0; tap < taps; ++tap) to[tap] = from[taps - 1 - tap];
      }
    }
  }
  conv2d_forward(t, grad_out, flipped.data(), nullptr, grad_input);
}

}  // namespace

namespace {

// The depthwise backward over DepthwisePlan's phase planes, one job per channel (its images in
// order). grad_weight's tap (i, j) is the dot product of grad_out, laid out in the phase width
// with zeros past the output width, with the tap's view of the input's phase planes: float sums
// of 16 lanes over runs of kSumRun positions, added up in double. grad_input (may be null):
// each tap adds w times that grad_out to its view of zeroed phase planes, merged back into the
// image (the columns past the output width add zeros).
void conv2d_backward_depthwise(const Conv2dShape& s, const float* grad_out, const float* input, const float* weight,
                               float* grad_input, float* grad_weight) {
  const DepthwisePlan plan(s);
  const int64_t taps = s.kernel_h * s.kernel_w, image_size = s.height * s.width;
  parallel_for(s.out_channels, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> phases(static_cast<size_t>(plan.planes_size(s))), grad(static_cast<size_t>(plan.extended));
    std::vector<double> sums(static_cast<size_t>(taps));
    for (int64_t c = begin; c < end; ++c) {
      std::fill(sums.begin(), sums.end(), 0.0);
      for (int64_t n = 0; n < s.batch; ++n) {
        const int64_t plane = n * s.out_channels + c;
        for (int64_t y = 0; y < plan.oh; ++y) {
          const float* from = grad_out + (plane * plan.oh + y) * plan.ow;
          float* to = grad.data() + y * plan.phase_w;
          std::copy(from, from + plan.ow, to);
          std::fill(to + plan.ow, to + plan.phase_w, 0.0f);
        }
        const float* __restrict g = grad.data();
        if (grad_weight != nullptr) {
          plan.split(s, input + plane * image_size, phases.data());
          for (int64_t t = 0; t < taps; ++t) {
            const float* __restrict v = plan.tap(s, static_cast<const float*>(phases.data()), t / s.kernel_w, t % s.kernel_w);
            for (int64_t k0 = 0; k0 < plan.extended; k0 += kSumRun) {
              constexpr int kLanes = 16;
              float lanes[kLanes] = {};
              const int64_t k1 = std::min(plan.extended, k0 + kSumRun);
              int64_t k = k0;
              for (; k + kLanes <= k1; k += kLanes) {
                for (int l = 0; l < kLanes; ++l) lanes[l] += g[k + l] * v[k + l];
              }
              double run = 0.0;
              for (; k < k1; ++k) run += g[k] * v[k];
              for (int l = 0; l < kLanes; ++l) run += lanes[l];
              sums[t] += run;
            }
          }
        }
        if (grad_input != nullptr) {
          std::fill(phases.begin(), phases.end(), 0.0f);
          for (int64_t t = 0; t < taps; ++t) {
            const float w = weight[c * taps + t];
            float* __restrict v = plan.tap(s, phases.data(), t / s.kernel_w, t % s.kernel_w);
            for (int64_t k = 0; k < plan.extended; ++k) v[k] += w * g[k];
          }
          plan.merge(s, phases.data(), grad_input + plane * image_size);  // writes every element
        }
      }
      if (grad_weight != nullptr) {
        for (int64_t t = 0; t < taps; ++t) grad_weight[c * taps + t] = static_cast<float>(sums[t]);
      }
    }
  });
}

}  // namespace

void conv2d_backward(const Conv2dShape& s, const float* grad_out, const float* input, const float* weight,
                     float* grad_input, float* grad_weight, float* grad_bias) {
  const int64_t cin_g = s.in_channels / s.groups, cout_g = s.out_channels / s.groups;
  const int64_t oh = s.out_h(), ow = s.out_w(), spatial = oh * ow;
  const int64_t taps = s.kernel_h * s.kernel_w;
  const int64_t patch = cin_g * taps;
  const int64_t image_size = s.height * s.width;
  const std::optional<Conv2dShape> by_convolution = input_grad_convolution(s);
  const bool depthwise = is_depthwise(s);
  if (depthwise) {
    conv2d_backward_depthwise(s, grad_out, input, weight, by_convolution.has_value() ? nullptr : grad_input, grad_weight);
  }
  if (grad_input != nullptr && by_convolution.has_value()) {
    input_grad_by_convolution(s, *by_convolution, grad_out, weight, grad_input);
  } else if (grad_input != nullptr && !depthwise) {
    // Jobs own (image, group, block of input channels): columns = weight^T x grad_out for those
    // channels' rows, added back into their own planes.
    const int64_t planes = s.batch * s.groups;
    const int64_t channel_work = std::max<int64_t>(1, taps * spatial * cout_g);
    const int64_t wanted_jobs = std::max<int64_t>(1, 4 * compute_threads() / std::max<int64_t>(planes, 1));
    const int64_t c_block = std::clamp<int64_t>(
        std::max({ceil_div(cin_g, wanted_jobs), ceil_div(kMinJobWork, channel_work), ceil_div(kTileRows, taps)}), 1,
        std::max<int64_t>(cin_g, 1));
    const int64_t c_blocks = ceil_div(cin_g, c_block);
    parallel_for(planes * c_blocks, 1, [&](int64_t begin, int64_t end) {
      std::vector<float> columns;
      for (int64_t job = begin; job < end; ++job) {
        const int64_t plane = job / c_blocks, n = plane / s.groups, g = plane % s.groups;
        const int64_t c_begin = (job % c_blocks) * c_block, c_end = std::min(cin_g, c_begin + c_block);
        float* image = grad_input + (n * s.in_channels + g * cin_g) * image_size;
        std::fill(image + c_begin * image_size, image + c_end * image_size, 0.0f);
        const int64_t rows = (c_end - c_begin) * taps;
        if (rows == 0 || spatial == 0) continue;
        columns.resize(static_cast<size_t>(rows * spatial));
        multiply_into(rows, spatial, cout_g, weight + g * cout_g * patch + c_begin * taps, int64_t{1}, patch,
                      grad_out + (n * s.out_channels + g * cout_g) * spatial, spatial, columns.data(), spatial);
        for (int64_t c = c_begin; c < c_end; ++c) {
          col2im_channel(s, columns.data() + (c - c_begin) * taps * spatial, image + c * image_size);
        }
      }
    });
  }
  if (grad_weight != nullptr && !depthwise) {
    // grad_weight^T [patch, cout_g] = sum over images of columns [patch, spatial] x grad_out^T
    // [spatial, cout_g]; jobs own blocks of patch rows and walk the images in order.
    // [n][g][spatial][cout_g], every element written below: left uninitialized, as zero-filling
    // it took 6% of this kernel's time on the launching thread alone.
    std::unique_ptr<float[]> grad_t(new float[static_cast<size_t>(s.batch * s.out_channels * spatial)]);
    parallel_for(s.batch * s.groups, 1, [&](int64_t begin, int64_t end) {
      for (int64_t plane = begin; plane < end; ++plane) {
        const float* from = grad_out + plane * cout_g * spatial;
        float* to = grad_t.get() + plane * cout_g * spatial;
        for (int64_t k0 = 0; k0 < spatial; k0 += 64) {
          for (int64_t c = 0; c < cout_g; ++c) {
            for (int64_t k = k0; k < std::min(spatial, k0 + 64); ++k) to[k * cout_g + c] = from[c * spatial + k];
          }
        }
      }
    });
    const int64_t row_work = std::max<int64_t>(1, s.batch * spatial * cout_g);
    const int64_t wanted_jobs = std::max<int64_t>(1, 4 * compute_threads() / std::max<int64_t>(s.groups, 1));
    const int64_t p_block = std::clamp<int64_t>(
        ceil_div(std::max(ceil_div(patch, wanted_jobs), ceil_div(kMinJobWork, row_work)), kTileRows) * kTileRows, 1,
        std::max<int64_t>(patch, 1));
    const int64_t p_blocks = ceil_div(patch, p_block);
    parallel_for(s.groups * p_blocks, 1, [&](int64_t begin, int64_t end) {
      std::vector<float> columns, partial;
      std::vector<double> sum_t;
      for (int64_t job = begin; job < end; ++job) {
        const int64_t g = job / p_blocks;
        const int64_t p_begin = (job % p_blocks) * p_block, p_end = std::min(patch, p_begin + p_block);
        const int64_t rows = p_end - p_begin;
        columns.resize(static_cast<size_t>(rows * spatial));
        sum_t.assign(static_cast<size_t>(rows * cout_g), 0.0);
        for (int64_t n = 0; n < s.batch; ++n) {
          const float* image = input + (n * s.in_channels + g * cin_g) * image_size;
          for (int64_t p = p_begin; p < p_end; ++p) {
            const int64_t c = p / taps, i = (p % taps) / s.kernel_w, j = p % s.kernel_w;
            im2col_row(s, image + c * image_size, i, j, 0, oh, columns.data() + (p - p_begin) * spatial);
          }
          // Float sums over runs of kSumRun output positions, added up in double.
          const float* grad = grad_t.get() + (n * s.groups + g) * cout_g * spatial;
          for (int64_t k0 = 0; k0 < spatial; k0 += kSumRun) {
            partial.resize(static_cast<size_t>(rows * cout_g));
            multiply_into(rows, cout_g, std::min(kSumRun, spatial - k0), columns.data() + k0, spatial, int64_t{1},
                          grad + k0 * cout_g, cout_g, partial.data(), cout_g);
            for (int64_t x = 0; x < rows * cout_g; ++x) sum_t[x] += partial[x];
          }
        }
        for (int64_t p = p_begin; p < p_end; ++p) {
          for (int64_t c = 0; c < cout_g; ++c) {
            grad_weight[(g * cout_g + c) * patch + p] = static_cast<float>(sum_t[(p - p_begin) * cout_g + c]);
          }
        }
      }
    });
  }
  if (grad_bias != nullptr) {
    parallel_for(s.out_channels, 1, [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) {
        constexpr int kLanes = 8;
        double lanes[kLanes] = {};
        double sum = 0;
        for (int64_t n = 0; n < s.batch; ++n) {
          const float* plane = grad_out + (n * s.out_channels + c) * spatial;
          int64_t k = 0;
          for (; k + kLanes <= spatial; k += kLanes) {
            for (int l = 0; l < kLanes; ++l) lanes[l] += plane[k + l];
          }
          for (; k < spatial; ++k) sum += plane[k];
        }
        for (int l = 0; l < kLanes; ++l) sum += lanes[l];
        grad_bias[c] = static_cast<float>(sum);
      }
    });
  }
}

}  // namespace torchneuron::kernels
