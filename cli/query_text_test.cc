// The CLI's own text of a model's history: gradients, the op audit and suspects appear where
// the record has them.
#include "cli/query_text.h"

#include <cmath>

#include <gtest/gtest.h>

namespace ts::cli {
namespace {

namespace pb = ::touchstone::v1;

TEST(QueryTextTest, ModelTextShowsGradientsAuditAndSuspects) {
  pb::ModelHistory h;
  h.set_model_id("org/gpt2-tiny");
  pb::ModelResult* r = h.add_sweeps()->mutable_result();
  pb::ModeVerdict* eager = r->add_modes();
  eager->set_mode(pb::MODE_EAGER);
  eager->set_status(pb::VERDICT_FAIL_ACCURACY);
  eager->set_grad_rmse_ratio(std::nan(""));
  eager->set_audited(true);
  pb::Suspect* s = eager->add_suspects();
  s->set_op("aten::gelu");
  s->set_shapes("[2,8,64]");
  s->set_dtype("float32");
  s->set_ratio(1e300);
  s->set_calls(3);
  s->set_total_calls(12);
  pb::ModeVerdict* train = r->add_modes();
  train->set_mode(pb::MODE_TRAIN);
  train->set_status(pb::VERDICT_PASS);
  train->set_grad_rmse_ratio(0.75);
  train->set_grad_worst_param("model.layers.0.self_attn.q_proj.weight");
  const std::string text = ModelText(h);
  EXPECT_NE(text.find("  eager    fail_accuracy          audited (1 suspects)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("           suspect: aten::gelu non-finite, 3/12 calls, [2,8,64] float32\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  train    pass                   grad x0.75\n"), std::string::npos) << text;
  EXPECT_NE(text.find("           worst gradient: model.layers.0.self_attn.q_proj.weight\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("grad x", text.find("eager")), text.find("grad x0.75"));  // NaN: none
}

}  // namespace
}  // namespace ts::cli
