#include "model/generate.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "hal/error.h"
#include "model/vision.h"

namespace msa::model {
namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

Model::Model(hal::Device& device, const Weights& w, std::optional<hal::DType> dtype, bool profile,
             dist::Communicator* comm)
    : device_(device),
      config_(w.config),
      weights_(device, w, dtype.value_or(w.config.torch_dtype)),
      ws_(device),
      prof_(device, profile),
      run_(device, prof_, comm) {}

hal::Device::Owned Model::encode_video(const VisionInput& in) {
  prof_.set_stage("vision");
  VisionEncoder enc(config_, weights_, ws_, run_);
  auto out = enc.encode(in);
  prof_.flush();
  return out;
}

Session::Session(Model& model, std::vector<std::vector<int32_t>> prompts, const hal::Tensor& vis,
                 SessionOptions options)
    : model_(model), prompts_(std::move(prompts)), vis_(vis), opt_(std::move(options)) {
  const Config& c = model_.config();
  MSA_CHECK_ARG(!prompts_.empty(), "session", "prompts", "needs at least one sequence");
  MSA_CHECK_ARG(opt_.max_chunk >= 1, "session", "max_chunk", "must be >= 1");
  MSA_CHECK_ARG(opt_.decode_steps >= 0, "session", "decode_steps", "must be >= 0");
  int64_t placeholders = 0, pages = 0;
  for (size_t s = 0; s < prompts_.size(); ++s) {
    MSA_CHECK_ARG(!prompts_[s].empty(), "session", "prompts", "prompt " + std::to_string(s) + " is empty");
    for (int32_t t : prompts_[s]) {
      MSA_CHECK_ARG(t >= 0 && t < c.vocab_size, "session", "prompts",
                    "token " + std::to_string(t) + " of prompt " + std::to_string(s) + " is outside the vocabulary");
      placeholders += t == c.image_token_id;
    }
    pages += KvCache::pages_for(static_cast<int64_t>(prompts_[s].size()) + opt_.decode_steps, c.sparse_block_size);
  }
  if (vis_.present()) {
    MSA_CHECK_ARG(vis_.rank == 2 && vis_.dim(0) == placeholders && vis_.dim(1) == c.hidden_size, "session", "vis",
                  "must be [" + std::to_string(placeholders) + " image placeholders][" + std::to_string(c.hidden_size) +
                      "], got " + vis_.str());
  }
  hal::DType ki = opt_.ki_dtype.value_or(model_.dtype() == hal::DType::bf16 ? hal::DType::bf16 : hal::DType::f32);
  cache_ = std::make_unique<KvCache>(model_.device(), c, model_.dtype(), ki, pages, opt_.poison_cache);
  DecoderOptions dopt;
  dopt.collect_selection = opt_.collect_selection;
  dopt.force_dense = opt_.force_dense;
  decoder_ = std::make_unique<Decoder>(c, model_.weights(), *cache_, model_.workspace(), model_.runner(), dopt);
  for (size_t s = 0; s < prompts_.size(); ++s) seq_ids_.push_back(cache_->add_sequence());
}

Session::~Session() {
  for (int s : seq_ids_) cache_->release(s);
}

void Session::collect(const StepOutput& out, const std::vector<int>& rows_seq, StepResult& r) {
  Profiler& prof = model_.profiler();
  OpRunner& run = model_.runner();
  if (!rows_seq.empty()) {
    const hal::HostTensor ids = run.download(out.ids);
    for (size_t i = 0; i < rows_seq.size(); ++i) r.ids[rows_seq[i]] = ids.data<int32_t>()[i];
    // Greedy ids of non-finite logits mean nothing: the step says so (finite_logits).
    const hal::HostTensor lg = run.download(out.logits);
    const int64_t V = lg.shape[1];
    for (size_t i = 0; i < rows_seq.size(); ++i) {
      std::vector<float>* dst = opt_.keep_logits ? &r.logits[rows_seq[i]] : nullptr;
      if (dst != nullptr) dst->resize(static_cast<size_t>(V));
      for (int64_t j = 0; j < V; ++j) {
        const float x = lg.get(static_cast<size_t>(i * V + j));
        if (!std::isfinite(x)) r.finite_logits = false;
        if (dst != nullptr) (*dst)[j] = x;
      }
    }
  }
  for (const auto& t : out.block_idx) r.block_idx.push_back(t);
  r.selection.merge(out.selection);
  prof.flush();
}

StepResult Session::prefill() {
  model_.profiler().set_stage("prefill");
  const int B = batch();
  StepResult r;
  r.ids.assign(B, -1);
  if (opt_.keep_logits) r.logits.resize(B);
  const int32_t placeholder = model_.config().image_token_id;
  int64_t total = 0, done = 0, vis_row = 0;
  for (const auto& p : prompts_) total += static_cast<int64_t>(p.size());
  // Tokens are consumed sequence by sequence, so each chunk's vision rows are the next
  // contiguous rows of vis_.
  int s = 0;
  size_t off = 0;
  int chunk = 0;
  while (s < B) {
    StepInput in;
    std::vector<int> rows_seq;
    int64_t budget = opt_.max_chunk;
    while (s < B && budget > 0) {
      const auto& p = prompts_[s];
      const int64_t n = std::min<int64_t>(budget, static_cast<int64_t>(p.size() - off));
      in.seqs.push_back(seq_ids_[s]);
      in.q_len.push_back(static_cast<int32_t>(n));
      in.tokens.insert(in.tokens.end(), p.begin() + off, p.begin() + off + n);
      off += n;
      budget -= n;
      if (off == p.size()) {
        in.out_rows.push_back(static_cast<int32_t>(in.tokens.size()) - 1);
        rows_seq.push_back(s);
        ++s;
        off = 0;
      }
    }
    if (vis_.present()) {
      const int64_t nv = std::count(in.tokens.begin(), in.tokens.end(), placeholder);
      if (nv > 0) in.vis = vis_.slice_rows(vis_row, vis_row + nv);
      vis_row += nv;
    }
    const StepOutput out = decoder_->forward(in);
    collect(out, rows_seq, r);
    done += static_cast<int64_t>(in.tokens.size());
    ++chunk;
    if (opt_.progress)
      opt_.progress("prefill chunk " + std::to_string(chunk) + ": " + std::to_string(in.tokens.size()) + " tokens of " +
                    std::to_string(in.seqs.size()) + " sequence(s), " + std::to_string(done) + "/" +
                    std::to_string(total) + " done");
  }
  return r;
}

StepResult Session::decode(std::span<const int32_t> tokens) {
  model_.profiler().set_stage("decode");
  const int B = batch();
  MSA_CHECK_ARG(static_cast<int>(tokens.size()) == B, "session", "tokens", "needs one token per sequence");
  StepInput in;
  in.seqs = seq_ids_;
  in.q_len.assign(B, 1);
  in.tokens.assign(tokens.begin(), tokens.end());
  std::vector<int> rows_seq(B);
  for (int b = 0; b < B; ++b) {
    in.out_rows.push_back(b);
    rows_seq[b] = b;
  }
  StepResult r;
  r.ids.assign(B, -1);
  if (opt_.keep_logits) r.logits.resize(B);
  const StepOutput out = decoder_->forward(in);
  collect(out, rows_seq, r);
  return r;
}

hal::Device::Owned encode_video_rows(Model& model, const VisionInput& in, int copies) {
  MSA_CHECK_ARG(copies >= 1, "vision", "copies", "must be >= 1");
  hal::Device::Owned one = model.encode_video(in);
  if (copies == 1) return one;
  const int64_t n = one.tensor.dim(0);
  hal::Device::Owned all = model.device().alloc_tensor(model.dtype(), {n * copies, one.tensor.dim(1)});
  for (int b = 0; b < copies; ++b) model.runner().copy(all.tensor.slice_rows(b * n, (b + 1) * n), one.tensor);
  model.device().stream().synchronize();
  return all;
}

GenerateResult generate(Session& s, int n) {
  MSA_CHECK_ARG(n >= 1, "generate", "n", "must be >= 1");
  GenerateResult g;
  g.tokens.resize(s.batch());
  double t0 = now_ms();
  StepResult r = s.prefill();
  g.prefill_ms = now_ms() - t0;
  g.prefill_selection = r.selection;
  t0 = now_ms();
  for (int step = 0;; ++step) {
    for (int b = 0; b < s.batch(); ++b) g.tokens[b].push_back(r.ids[b]);
    if (!r.logits.empty()) g.logits.push_back(std::move(r.logits));
    if (step + 1 == n) break;
    std::vector<int32_t> next(r.ids);
    r = s.decode(next);
    g.decode_selection.merge(r.selection);
  }
  g.decode_ms = now_ms() - t0;
  return g;
}

std::vector<int32_t> build_prompt(const Config& c, std::span<const int32_t> text, int64_t n_vision) {
  MSA_CHECK_ARG(n_vision == 0 || c.image_token_id >= 0, "prompt", "video",
                "this model has no image placeholder token (image_token_id)");
  std::vector<int32_t> p(static_cast<size_t>(n_vision), c.image_token_id);
  p.insert(p.end(), text.begin(), text.end());
  return p;
}

std::vector<int32_t> random_tokens(const Config& c, int64_t n, uint64_t seed) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
  for (auto& v : t) {
    do {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      v = static_cast<int32_t>(s % static_cast<uint64_t>(c.vocab_size));
    } while (v == c.image_token_id);
  }
  return t;
}

}  // namespace msa::model
