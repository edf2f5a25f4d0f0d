// Tests for torch.special's Bessel, Airy, normal-distribution and zeta functions in double
// (kernels/special_math.h): values against mpmath's (50+ digits, written out here), and the
// values at 0, +-inf, NaN and outside the domain that CPU PyTorch gives.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/special_math.h"

namespace s = torchneuron::kernels::special;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Relative error within `tolerance`; near zeros of the oscillating functions an absolute floor.
void expect_close(double actual, double expected, double tolerance = 1e-14, double floor = 0) {
  EXPECT_LE(std::fabs(actual - expected), tolerance * std::fabs(expected) + floor) << actual << " vs " << expected;
}

TEST(SpecialMath, BesselAgainstMpmath) {
  expect_close(s::bessel_j0(2.5), -4.83837764681979976e-02, 1e-14, 1e-16);
  expect_close(s::bessel_j0(30.0), -8.63679835810402113e-02, 1e-14, 1e-16);   // Hankel's expansion
  expect_close(s::bessel_j0(-1e4), -7.09616035338880152e-03, 1e-13, 1e-17);   // exact phase
  expect_close(s::bessel_j1(-7.25), -6.85817006531317386e-02, 1e-14, 1e-16);
  expect_close(s::bessel_j1(100.5), -5.77911239969320228e-02, 1e-14, 1e-17);
  expect_close(s::bessel_y0(0.25), -9.31573024930058669e-01);
  expect_close(s::bessel_y0(1e-12), -1.76642586682149521e+01);                // the small-x form
  expect_close(s::bessel_y1(40.0), -5.79350582154963302e-03, 1e-14, 1e-17);
  expect_close(s::bessel_y1(3.0), 3.24674424791799976e-01);
  expect_close(s::modified_bessel_i(0, 3.0), 4.88079258586502451e+00);
  expect_close(s::modified_bessel_i(1, -700.0), -1.52850039023390060e+302);
  expect_close(s::modified_bessel_k(0, 0.01, false), 4.72124473016109469e+00);
  expect_close(s::modified_bessel_k(1, 50.0, false), 3.44410222671755546e-23);
  expect_close(s::modified_bessel_k(0, 1e6, true), 1.25331398065132125e-03);   // K itself underflows
  expect_close(s::modified_bessel_k(1, 3.0, true), 8.06563480128786869e-01);
  expect_close(s::spherical_bessel_j0(7.0), 9.38552283883984373e-02);
}

TEST(SpecialMath, AiryAgainstMpmath) {
  expect_close(s::airy_ai(-2.5), -1.12325067692966088e-01);
  expect_close(s::airy_ai(0.5), 2.31693606480833481e-01);
  expect_close(s::airy_ai(-50.0), -1.61881423612320913e-01, 1e-13, 1e-16);
  expect_close(s::airy_ai(3.0), 6.59113935746071921e-03, 1e-13);
  expect_close(s::airy_ai(20.0), 1.69167286867054043e-27, 1e-13);
  expect_close(s::airy_ai(0.0), 3.55028053887817239e-01);
}

TEST(SpecialMath, NormalAgainstMpmath) {
  expect_close(s::erfcx(-3.0), 1.62059888539995864e+04);
  expect_close(s::erfcx(2.0), 2.55395676310505748e-01);
  expect_close(s::erfcx(30.0), 1.87958888614167506e-02);
  expect_close(s::log_ndtr(-40.0), -8.04608442013753802e+02);
  expect_close(s::log_ndtr(-0.5), -1.17591176159361854e+00);
  expect_close(s::log_ndtr(10.0), -7.61985302416052545e-24);
  expect_close(s::ndtri(1e-300), -3.70470962993612005e+01);
  expect_close(s::ndtri(0.3), -5.24400512708040778e-01);
  expect_close(s::ndtri(0.975), 1.95996398454005383e+00);
}

TEST(SpecialMath, ZetaAgainstMpmath) {
  expect_close(s::hurwitz_zeta_real(2.0, 1.0), M_PI * M_PI / 6);
  expect_close(s::hurwitz_zeta_real(3.0, 0.5), 8.41439832211715988e+00);
  expect_close(s::hurwitz_zeta_real(1.5, 1e6), 2.00000050000012511e-03);
  expect_close(s::hurwitz_zeta_real(1.000001, 2.0), 9.99999577298004413e+05, 1e-13);  // of the double 1.000001
  expect_close(s::hurwitz_zeta_real(2.0, -1.5), 9.37924664498912364e+00);
  expect_close(s::hurwitz_zeta_real(7.0, -2.25), -1.63767007427664248e+04);
}

TEST(SpecialMath, ValuesOutsideTheDomainAsCpu) {
  EXPECT_EQ(s::bessel_j0(0.0), 1.0);
  EXPECT_TRUE(std::signbit(s::bessel_j1(-0.0)));
  EXPECT_TRUE(std::isnan(s::bessel_j0(kInf)));
  EXPECT_EQ(s::bessel_y0(0.0), -kInf);
  EXPECT_EQ(s::bessel_y1(-0.0), -kInf);
  EXPECT_TRUE(std::isnan(s::bessel_y0(-1.0)));
  EXPECT_EQ(s::bessel_y1(5e-324), -kInf);
  EXPECT_TRUE(std::isnan(s::modified_bessel_i(0, kInf)));
  EXPECT_EQ(s::modified_bessel_k(0, 0.0, false), kInf);
  EXPECT_EQ(s::modified_bessel_k(1, kInf, true), 0.0);
  EXPECT_TRUE(std::isnan(s::modified_bessel_k(0, -2.0, true)));
  EXPECT_FALSE(std::isnan(s::modified_bessel_k(0, 5e-324, false)));  // libstdc++ alone gives NaN
  EXPECT_EQ(s::spherical_bessel_j0(-kInf), 0.0);
  EXPECT_TRUE(std::isnan(s::airy_ai(kInf)));
  EXPECT_EQ(s::erfcx(-kInf), kInf);
  EXPECT_EQ(s::erfcx(-1e300), kInf);
  EXPECT_EQ(s::erfcx(kInf), 0.0);
  EXPECT_EQ(s::log_ndtr(-kInf), -kInf);
  EXPECT_TRUE(std::signbit(s::log_ndtr(1e300)) && s::log_ndtr(1e300) == 0);
  EXPECT_EQ(s::ndtri(0.0), -kInf);
  EXPECT_EQ(s::ndtri(1.0), kInf);
  EXPECT_TRUE(std::isnan(s::ndtri(1.5)));
  EXPECT_EQ(s::hurwitz_zeta_real(1.0, kNaN), kInf);
  EXPECT_TRUE(std::isnan(s::hurwitz_zeta_real(0.5, 2.0)));
  EXPECT_EQ(s::hurwitz_zeta_real(2.0, -3.0), kInf);
  EXPECT_EQ(s::hurwitz_zeta_real(kNaN, -kInf), kInf);
  EXPECT_TRUE(std::isnan(s::hurwitz_zeta_real(1.5, -1.5)));
  EXPECT_TRUE(std::isnan(s::hurwitz_zeta_real(2.0, kInf)));
  EXPECT_EQ(s::hurwitz_zeta_real(kInf, 1.0), 1.0);
  EXPECT_EQ(s::hurwitz_zeta_real(kInf, 0.5), kInf);
  EXPECT_TRUE(std::isnan(s::hurwitz_zeta_real(kInf, 2.0)));
}

}  // namespace
