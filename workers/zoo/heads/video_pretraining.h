// VideoMAEForPreTraining (modeling_videomae.py): the VideoMAE encoder on the visible tubelets,
// encoder_to_decoder, the visible tokens plus the sinusoid table's positions followed by
// mask_token plus the masked positions, the decoder (VideoMAE layers at the decoder_* sizes,
// `decoder.norm` with nn.LayerNorm's eps 1e-5, `decoder.head` to tubelet x patch^2 x channels)
// on the masked tokens, and the MSE against the masked tubelets' pixels (un-normalised with
// ImageNet's mean and std for 3 channels; per-patch normalised with norm_pix_loss).
//
// Thread-safety: immutable after construction.
#pragma once

#include <memory>

#include "workers/zoo/trunks/vision_video.h"

namespace ts::zoo::internal {

struct VideoPretrainingRecipe {
  PreLnEncoderRecipe decoder;  // decoder_* sizes; layers under "decoder.decoder_layers."
  bool norm_pix_loss = true;
};

// Outputs "logits" [B, masked, tubelet * patch^2 * channels]. Inputs pixel_values [B, frames, C,
// H, W] and bool_masked_pos (bool [B, tubelets], half of each video's set).
StatusOr<std::unique_ptr<Model>> MakeVideoMaePretraining(ModelSpec spec,
                                                         std::unique_ptr<VideoMaeTrunk> trunk,
                                                         VideoPretrainingRecipe recipe);

}  // namespace ts::zoo::internal
