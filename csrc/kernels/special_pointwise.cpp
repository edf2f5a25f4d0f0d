#include "kernels/special_pointwise.h"

#include <limits>
#include <string>

#include "kernels/elementwise_map.h"
#include "kernels/special_math.h"
#include "runtime/errors.h"

namespace torchneuron::kernels {
namespace {

// Float inputs compute in double and round once: CPU's float kernels are within a few ulps of
// that, and OpInfo's tolerances are set against float64.
template <int K, typename F>
void map_float(const ElementwiseArgs& args, const char* what, F f) {
  if (args.numel() == 0) return;
  switch (args.dtypes[0]) {
    case DType::kFloat32:
      return elementwise_map::map<float, float, K>(args, f);
    case DType::kFloat64:
      return elementwise_map::map<double, double, K>(args, f);
    default:
      throw runtime::KernelError(std::string(what) + " takes float32 and float64 only");
  }
}

}  // namespace

double special_function_value(SpecialFunction kind, double x) {
  namespace s = special;
  switch (kind) {
    case SpecialFunction::kBesselJ0: return s::bessel_j0(x);
    case SpecialFunction::kBesselJ1: return s::bessel_j1(x);
    case SpecialFunction::kBesselY0: return s::bessel_y0(x);
    case SpecialFunction::kBesselY1: return s::bessel_y1(x);
    case SpecialFunction::kModifiedBesselI0: return s::modified_bessel_i(0, x);
    case SpecialFunction::kModifiedBesselI1: return s::modified_bessel_i(1, x);
    case SpecialFunction::kModifiedBesselK0: return s::modified_bessel_k(0, x, false);
    case SpecialFunction::kModifiedBesselK1: return s::modified_bessel_k(1, x, false);
    case SpecialFunction::kScaledModifiedBesselK0: return s::modified_bessel_k(0, x, true);
    case SpecialFunction::kScaledModifiedBesselK1: return s::modified_bessel_k(1, x, true);
    case SpecialFunction::kSphericalBesselJ0: return s::spherical_bessel_j0(x);
    case SpecialFunction::kAiryAi: return s::airy_ai(x);
    case SpecialFunction::kErfcx: return s::erfcx(x);
    case SpecialFunction::kLogNdtr: return s::log_ndtr(x);
    case SpecialFunction::kNdtri: return s::ndtri(x);
  }
  return std::numeric_limits<double>::quiet_NaN();
}

void special_function(SpecialFunction kind, const ElementwiseArgs& args) {
  map_float<1>(args, "special function", [kind](auto x) {
    return static_cast<decltype(x)>(special_function_value(kind, static_cast<double>(x)));
  });
}

void hurwitz_zeta(const ElementwiseArgs& args) {
  map_float<2>(args, "zeta", [](auto x, auto q) {
    return static_cast<decltype(x)>(special::hurwitz_zeta_real(static_cast<double>(x), static_cast<double>(q)));
  });
}

}  // namespace torchneuron::kernels
