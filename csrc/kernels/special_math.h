// torch.special's Bessel, Airy, normal-distribution and Hurwitz zeta functions at one double
// argument (special_bessel.cpp, special_normal_zeta.cpp). Values at 0, +-inf, NaN and outside
// the domain are those CPU PyTorch gives, except where a function's comment says otherwise.
#pragma once

namespace torchneuron::kernels::special {

// Bessel functions of the first and second kind, orders 0 and 1. NaN at +-inf (as CPU).
double bessel_j0(double x);
double bessel_j1(double x);
double bessel_y0(double x);
double bessel_y1(double x);

// I0 / I1 (NaN at +-inf, as CPU), K0 / K1 and exp(x) K0 / K1.
double modified_bessel_i(int order, double x);
double modified_bessel_k(int order, double x, bool scaled);

double spherical_bessel_j0(double x);
double airy_ai(double x);

// exp(x^2) erfc(x), log of the standard normal CDF, and its inverse.
double erfcx(double x);
double log_ndtr(double x);
double ndtri(double p);

// Hurwitz zeta(x, q) = sum over k >= 0 of (q + k)^-x, for real x.
double hurwitz_zeta_real(double x, double q);

}  // namespace torchneuron::kernels::special
