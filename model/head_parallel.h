// Head parallelism for the text decoder: rank r of `world` owns KV heads
// [r*Hkv/world, (r+1)*Hkv/world), their GQA query heads and (per-KV-head selection) their
// index heads, plus a 1/world slice of the MLP's intermediate width. The indexer key head
// is shared by every KV head, so every rank keeps the whole indexer key cache: its
// projection is replicated (a [Di][H] matrix per layer) and no transfer is needed to
// select blocks. Attention output and MLP down projections are row-parallel: each rank
// adds its partial product through one all-reduce (model::OpRunner::all_reduce).
// Embedding, norms, LM head and the vision encoder are replicated.
#pragma once
#include "hal/export.h"
#include "model/config.h"
#include "model/weights.h"

namespace msa::model {

// The configuration one rank runs: heads and intermediate width divided by `world`.
// Throws msa::Error naming --gpus when the model's heads or MLP do not divide.
MSA_API Config shard_config(const Config& c, int world);

// Rank `rank`'s slices of every tensor (config: shard_config(w.config, world)).
MSA_API Weights shard_weights(const Weights& w, int rank, int world);

}  // namespace msa::model
