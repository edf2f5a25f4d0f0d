// The fused recurrent cells PyTorch calls for accelerator devices in nn.LSTM / nn.GRU (and
// their backward ops), composed on the host from native pointwise ops. CPU PyTorch has no
// kernel for these, so without them recurrent models could not run on neuron at all.
// Workspaces are ours to define: each backward reads back only what its forward saved.
#include <ATen/ops/add.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/rsub.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/tanh.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

#include <tuple>

#include "aten/device/neuron_tensor.h"

namespace torchneuron::aten {
namespace rnn {
namespace {

at::Tensor with_biases(const at::Tensor& gates, const std::optional<at::Tensor>& bias) {
  return bias.has_value() && bias->defined() ? at::add(gates, *bias) : gates;
}

at::Tensor or_zeros(const std::optional<at::Tensor>& t, const at::Tensor& like) {
  return t.has_value() && t->defined() ? *t : at::zeros_like(like);
}

// s * (1 - s): the sigmoid's derivative from its output; 1 - t^2 for tanh.
at::Tensor sigmoid_slope(const at::Tensor& s) { return at::mul(s, at::rsub(s, 1)); }
at::Tensor tanh_slope(const at::Tensor& t) { return at::rsub(at::mul(t, t), 1); }

void check_cell(const char* op, const at::Tensor& input_gates, const at::Tensor& hidden_gates, const at::Tensor& state,
                int64_t gates) {
  check_same_device(op, input_gates.device(), {&hidden_gates, &state});
  TORCH_CHECK(input_gates.sizes() == hidden_gates.sizes(), op, ": input_gates ", input_gates.sizes(),
              " and hidden_gates ", hidden_gates.sizes(), " must have the same size");
  TORCH_CHECK(input_gates.dim() == 2 && input_gates.size(1) == gates * state.size(-1), op, ": expected gates of size [batch, ",
              gates, " * hidden], got ", input_gates.sizes(), " for a state of size ", state.sizes());
}

}  // namespace

// Workspace: the activated gates [i, f, g, o].
std::tuple<at::Tensor, at::Tensor, at::Tensor> lstm_cell(const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                                                         const at::Tensor& cx, const std::optional<at::Tensor>& input_bias,
                                                         const std::optional<at::Tensor>& hidden_bias) {
  check_cell("_thnn_fused_lstm_cell", input_gates, hidden_gates, cx, 4);
  const at::Tensor gates = with_biases(with_biases(at::add(input_gates, hidden_gates), input_bias), hidden_bias);
  const auto chunks = gates.chunk(4, 1);
  const at::Tensor i = at::sigmoid(chunks[0]), f = at::sigmoid(chunks[1]), g = at::tanh(chunks[2]),
                   o = at::sigmoid(chunks[3]);
  const at::Tensor cy = at::add(at::mul(f, cx), at::mul(i, g));
  const at::Tensor hy = at::mul(o, at::tanh(cy));
  return {hy, cy, at::cat({i, f, g, o}, 1)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> lstm_cell_backward(const std::optional<at::Tensor>& grad_hy_opt,
                                                                  const std::optional<at::Tensor>& grad_cy_opt,
                                                                  const at::Tensor& cx, const at::Tensor& cy,
                                                                  const at::Tensor& workspace, bool has_bias) {
  const auto gates = workspace.chunk(4, 1);
  const at::Tensor &i = gates[0], &f = gates[1], &g = gates[2], &o = gates[3];
  const at::Tensor grad_hy = or_zeros(grad_hy_opt, cy), grad_cy = or_zeros(grad_cy_opt, cy);
  const at::Tensor tanh_cy = at::tanh(cy);
  const at::Tensor grad_c = at::add(grad_cy, at::mul(at::mul(grad_hy, o), tanh_slope(tanh_cy)));
  const at::Tensor grad_gates = at::cat({at::mul(at::mul(grad_c, g), sigmoid_slope(i)),
                                         at::mul(at::mul(grad_c, cx), sigmoid_slope(f)),
                                         at::mul(at::mul(grad_c, i), tanh_slope(g)),
                                         at::mul(at::mul(grad_hy, tanh_cy), sigmoid_slope(o))},
                                        1);
  const at::Tensor grad_bias = has_bias ? at::sum(grad_gates, {0}) : at::Tensor();
  return {grad_gates, at::mul(grad_c, f), grad_bias};
}

// Workspace: [r, z, n, the hidden gates' n part, hx].
std::tuple<at::Tensor, at::Tensor> gru_cell(const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                                            const at::Tensor& hx, const std::optional<at::Tensor>& input_bias,
                                            const std::optional<at::Tensor>& hidden_bias) {
  check_cell("_thnn_fused_gru_cell", input_gates, hidden_gates, hx, 3);
  const auto in = with_biases(input_gates, input_bias).chunk(3, 1);
  const auto hid = with_biases(hidden_gates, hidden_bias).chunk(3, 1);
  const at::Tensor r = at::sigmoid(at::add(in[0], hid[0]));
  const at::Tensor z = at::sigmoid(at::add(in[1], hid[1]));
  const at::Tensor n = at::tanh(at::add(in[2], at::mul(r, hid[2])));
  const at::Tensor hy = at::add(n, at::mul(z, at::sub(hx, n)));
  return {hy, at::cat({r, z, n, hid[2], hx}, 1)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> gru_cell_backward(const at::Tensor& grad_hy,
                                                                                         const at::Tensor& workspace,
                                                                                         bool has_bias) {
  const auto saved = workspace.chunk(5, 1);
  const at::Tensor &r = saved[0], &z = saved[1], &n = saved[2], &hn = saved[3], &hx = saved[4];
  const at::Tensor grad_n = at::mul(at::mul(grad_hy, at::rsub(z, 1)), tanh_slope(n));
  const at::Tensor grad_z = at::mul(at::mul(grad_hy, at::sub(hx, n)), sigmoid_slope(z));
  const at::Tensor grad_r = at::mul(at::mul(grad_n, hn), sigmoid_slope(r));
  const at::Tensor grad_input_gates = at::cat({grad_r, grad_z, grad_n}, 1);
  const at::Tensor grad_hidden_gates = at::cat({grad_r, grad_z, at::mul(grad_n, r)}, 1);
  const at::Tensor grad_input_bias = has_bias ? at::sum(grad_input_gates, {0}) : at::Tensor();
  const at::Tensor grad_hidden_bias = has_bias ? at::sum(grad_hidden_gates, {0}) : at::Tensor();
  return {grad_input_gates, grad_hidden_gates, at::mul(grad_hy, z), grad_input_bias, grad_hidden_bias};
}

}  // namespace rnn

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(rnn::lstm_cell));
  m.impl("_thnn_fused_lstm_cell_backward_impl", TORCH_FN(rnn::lstm_cell_backward));
  m.impl("_thnn_fused_gru_cell", TORCH_FN(rnn::gru_cell));
  m.impl("_thnn_fused_gru_cell_backward", TORCH_FN(rnn::gru_cell_backward));
}

}  // namespace torchneuron::aten
