// The encoder-decoder trunk's sparse feed-forward layers (encoder_decoder.h): Switch
// Transformers' top-1 router over T5 DenseActDense experts.
#include "workers/zoo/nn.h"
#include "workers/zoo/trunks/encoder_decoder.h"

namespace ts::zoo::internal {

// Every expert runs on every token and the top-1 one-hot mask combines them: the same values as
// transformers' gather per expert, with static shapes (the compiled mode traces one graph). The
// expert capacity is not applied: the family refuses one below the sequence length, where no
// stored transformers version drops a token.
at::Tensor SwitchSparseMlp(const at::Tensor& x, const at::Tensor& router_w,
                           const at::Tensor& router_b, const std::vector<at::Tensor>& wi,
                           const std::vector<at::Tensor>& wo, Activation act) {
  // router_dtype float32: the router's input and classifier in float32 (a double run keeps
  // double), the softmax there; the argmax is taken over these probabilities and the chosen one
  // cast back to the input's dtype, as router_probs.to(input_dtype).
  const at::ScalarType rt = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  at::Tensor logits =
      nn::Linear(x.to(rt), router_w.to(rt), router_b.defined() ? router_b.to(rt) : at::Tensor());
  auto [p, idx] = at::max(at::softmax(logits, -1), -1, /*keepdim=*/true);
  at::Tensor out;
  for (size_t e = 0; e < wi.size(); ++e) {
    at::Tensor y = nn::Linear(nn::Activate(nn::Linear(x, wi[e]), act), wo[e]);
    y = y * idx.eq(static_cast<int64_t>(e)).to(x.scalar_type());
    out = out.defined() ? out + y : y;
  }
  return p.to(x.scalar_type()) * out;
}

}  // namespace ts::zoo::internal
