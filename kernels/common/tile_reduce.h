// The 16 rows of an mma.sync m16n8 C tile summed per column, for the scorers' epilogues
// (block_scores.cu's tensor-core and wgmma kernels, common/scores_decode.h).
//
// Lane (g, t) (g = lane / 4, t = lane % 4) holds v[2j + c]: its rows' value of column
// 8j + 2t + c, j < 4, c < 2. Three transpose steps over lane bits 2..4 (xor 16, 8, 4) halve
// the columns a lane carries and add its partner's; afterwards lane (g, t) returns column
// 8 (g >> 1) + 2t + (g & 1) summed over the 8 lanes of its t, i.e. over all 16 rows. The
// order of the additions is fixed, so the result is deterministic.
#pragma once

QSA_DEVICE float qsa_tile_rows16_sum(float (&v)[8], int g) {
  const bool u4 = (g & 4) != 0, u2 = (g & 2) != 0, u1 = (g & 1) != 0;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const float send = u4 ? v[k] : v[k + 4];
    const float keep = u4 ? v[k + 4] : v[k];
    v[k] = keep + qsa_shfl_xor(send, 16);
  }
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    const float send = u2 ? v[k] : v[k + 2];
    const float keep = u2 ? v[k + 2] : v[k];
    v[k] = keep + qsa_shfl_xor(send, 8);
  }
  const float send = u1 ? v[0] : v[1];
  const float keep = u1 ? v[1] : v[0];
  return keep + qsa_shfl_xor(send, 4);
}
