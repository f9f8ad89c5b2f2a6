#include "workers/catalog/catalog.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <istream>
#include <numeric>
#include <ostream>
#include <random>
#include <set>
#include <sstream>

#include "workers/zoo/config_hash.h"
#include "workers/zoo/model.h"

namespace ts::catalog {
namespace {

using nlohmann::json;

// Shares of LLM configs by class among 2,980 Hub LLM configs (../shared/data/README.md):
// LlamaForCausalLM 44%, GPT-2 15% (T5's 17% counts under text2text). Other text-generation
// classes share the rest by their id counts.
const std::map<std::string, double>& LlmShares() {
  static const std::map<std::string, double> kShares = {{"LlamaForCausalLM", 0.44},
                                                        {"GPT2LMHeadModel", 0.15}};
  return kShares;
}

uint64_t Mix(uint64_t a, uint64_t b) {
  uint64_t x = a ^ (b + 0x9e3779b97f4a7c15ull + (a << 6) + (a >> 2));
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}

StatusOr<json> ReadJsonFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFoundError("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, false);
  if (j.is_discarded()) return InvalidArgumentError(path + ": not valid JSON");
  return j;
}

struct ClassPlan {
  zoo::ArchInfo info;
  double weight = 0;
  std::vector<std::string> real_ids;
  std::vector<json> bases;  // example config first, then real configs of this class
  int64_t count = 0;
};

// Largest-remainder apportionment of `total` over `shares` (sum > 0).
std::vector<int64_t> Apportion(const std::vector<double>& shares, int64_t total) {
  const double sum = std::accumulate(shares.begin(), shares.end(), 0.0);
  std::vector<int64_t> out(shares.size());
  std::vector<std::pair<double, size_t>> rem;
  int64_t used = 0;
  for (size_t i = 0; i < shares.size(); ++i) {
    const double exact = sum > 0 ? shares[i] / sum * static_cast<double>(total) : 0;
    out[i] = static_cast<int64_t>(std::floor(exact));
    used += out[i];
    rem.push_back({exact - std::floor(exact), i});
  }
  std::stable_sort(rem.begin(), rem.end(), [](auto& a, auto& b) { return a.first > b.first; });
  for (size_t k = 0; used < total && k < rem.size(); ++k, ++used) out[rem[k].second] += 1;
  return out;
}

// One variation of a base config, the way checkpoints of one family differ. Returns the base
// unchanged for a fine-tune style duplicate.
json Vary(const json& base, std::mt19937_64& rng) {
  json c = base;
  std::uniform_int_distribution<int> pick(0, 99);
  if (pick(rng) < 35) return c;  // fine-tune of the same base: identical config
  auto has_int = [&](const char* k) { return c.contains(k) && c[k].is_number_integer(); };
  if (has_int("num_hidden_layers") && pick(rng) < 60) {
    const int64_t l = c["num_hidden_layers"];
    const int64_t options[] = {std::max<int64_t>(1, l / 2), l, l + l / 2, std::max<int64_t>(1, l * 2 / 3)};
    c["num_hidden_layers"] = options[pick(rng) % 4];
  }
  if (has_int("hidden_size") && has_int("num_attention_heads") && pick(rng) < 50) {
    const int64_t h = c["hidden_size"], heads = c["num_attention_heads"];
    const bool explicit_head_dim = c.contains("head_dim") && !c["head_dim"].is_null();
    if (heads > 0 && h % heads == 0 && !explicit_head_dim) {
      const int64_t head_dim = h / heads;
      int64_t kv = has_int("num_key_value_heads") ? c["num_key_value_heads"].get<int64_t>() : heads;
      const int64_t ratio = kv > 0 && heads % kv == 0 ? heads / kv : 1;
      const int64_t factors[] = {1, 2};
      const bool grow = pick(rng) < 50;
      const int64_t new_heads = grow ? heads * factors[1] : std::max<int64_t>(ratio, heads / 2);
      if (new_heads % ratio == 0) {
        const double scale = static_cast<double>(new_heads) / static_cast<double>(heads);
        c["num_attention_heads"] = new_heads;
        c["hidden_size"] = new_heads * head_dim;
        if (has_int("num_key_value_heads")) c["num_key_value_heads"] = new_heads / ratio;
        if (has_int("intermediate_size")) {
          c["intermediate_size"] = static_cast<int64_t>(
              std::llround(static_cast<double>(c["intermediate_size"].get<int64_t>()) * scale / 64.0) * 64);
        }
      }
    }
  }
  if (has_int("vocab_size") && pick(rng) < 40) {
    c["vocab_size"] = c["vocab_size"].get<int64_t>() + 8 * (1 + pick(rng) % 32);  // added tokens
  }
  if (c.contains("rope_theta") && c["rope_theta"].is_number() && pick(rng) < 25) {
    const double thetas[] = {10000.0, 500000.0, 1000000.0};
    c["rope_theta"] = thetas[pick(rng) % 3];
  }
  if (c.contains("num_labels") || c.contains("id2label")) {
    const int labels[] = {2, 2, 3, 5, 7, 10, 20};
    const int n = labels[pick(rng) % 7];
    json id2label = json::object();
    for (int i = 0; i < n; ++i) id2label[std::to_string(i)] = "LABEL_" + std::to_string(i);
    c["id2label"] = id2label;
    c["num_labels"] = n;
  }
  return c;
}

const char* kOrgs[] = {"acme-ai", "nlp-lab", "open-models", "research-group", "community",
                       "university-nlp", "startup-ml", "finetunes", "benchmarks", "edge-ai"};
const char* kSuffixes[] = {"finetuned-imdb", "squad", "conll03", "sst2", "instruct", "chat",
                           "base-v2", "distilled", "lora-merged", "multilingual", "code", "ft"};

std::string GeneratedId(const ClassPlan& p, int64_t i, std::mt19937_64& rng) {
  std::uniform_int_distribution<size_t> o(0, std::size(kOrgs) - 1), s(0, std::size(kSuffixes) - 1);
  std::string stem = p.info.family;
  std::replace(stem.begin(), stem.end(), '_', '-');
  return std::string(kOrgs[o(rng)]) + "/" + stem + "-" + kSuffixes[s(rng)] + "-" + std::to_string(i);
}

}  // namespace

const std::map<std::string, double>& TargetTaskMix() {
  // The 2022 Hub snapshot (../shared/data/README.md: text-classification 21.3%, text-generation
  // 12.2%, text2text 11.8%, token-classification 9.2%, fill-mask 8.7%, ASR 8.5%, image
  // classification 1.9%) with text generation raised to today's dominance and the remaining
  // mass on feature extraction, QA and vision/audio heads.
  static const std::map<std::string, double> kMix = {
      {"text-generation", 0.30},         {"text-classification", 0.19},
      {"text2text-generation", 0.09},    {"token-classification", 0.08},
      {"fill-mask", 0.07},               {"feature-extraction", 0.07},
      {"automatic-speech-recognition", 0.06}, {"question-answering", 0.04},
      {"image-classification", 0.04},    {"audio-classification", 0.015},
      {"zero-shot-image-classification", 0.01}, {"image-feature-extraction", 0.01},
      {"multiple-choice", 0.005},
  };
  return kMix;
}

std::string ToJsonLine(const Row& r) {
  nlohmann::ordered_json j;
  j["id"] = r.id;
  j["task"] = r.task;
  j["arch"] = r.arch;
  j["family"] = r.family;
  j["config_hash"] = r.config_hash;
  j["config"] = r.config;
  j["tiny_config"] = r.tiny_config;
  if (!r.checkpoint.empty()) j["checkpoint"] = r.checkpoint;
  return j.dump();
}

StatusOr<Row> ParseJsonLine(const std::string& line) {
  json j = json::parse(line, nullptr, false);
  if (j.is_discarded()) return InvalidArgumentError("not valid JSON");
  if (!j.is_object()) return InvalidArgumentError("expected a JSON object");
  Row r;
  for (const char* k : {"id", "task", "arch"}) {
    if (!j.contains(k) || !j[k].is_string()) return InvalidArgumentError(std::string(k) + ": missing or not a string");
  }
  if (!j.contains("config") || !j["config"].is_object()) return InvalidArgumentError("config: missing or not an object");
  r.id = j["id"];
  r.task = j["task"];
  r.arch = j["arch"];
  r.family = j.value("family", std::string());
  r.config = j["config"];
  r.tiny_config = j.value("tiny_config", json());
  r.config_hash = j.value("config_hash", zoo::ConfigHash(r.config));
  if (j.contains("checkpoint") && !j["checkpoint"].is_null()) {
    if (!j["checkpoint"].is_string()) return InvalidArgumentError("checkpoint: not a string");
    r.checkpoint = j["checkpoint"];
  }
  return r;
}

StatusOr<Row> ParseKeys(const std::string& line) {
  // Lines we write start with id, task, arch, family, config_hash: parse just that prefix.
  const size_t cut = line.find(",\"config\":");
  if (cut != std::string::npos) {
    json j = json::parse(line.substr(0, cut) + "}", nullptr, false);
    if (!j.is_discarded() && j.is_object() && j.contains("id") && j["id"].is_string() &&
        j.contains("task") && j["task"].is_string() && j.contains("arch") && j["arch"].is_string()) {
      Row r;
      r.id = j["id"];
      r.task = j["task"];
      r.arch = j["arch"];
      r.family = j.value("family", std::string());
      r.config_hash = j.value("config_hash", std::string());
      return r;
    }
  }
  return ParseJsonLine(line);
}

namespace {

// The real Hub model ids of each class (ptm_naming_model_types.json: model_type -> arch -> ids).
std::map<std::string, std::vector<std::string>> IdsByArch(const json& ptm) {
  std::map<std::string, std::vector<std::string>> ids_by_arch;
  for (const auto& [model_type, archs] : ptm.items()) {
    if (!archs.is_object()) continue;
    for (const auto& [arch, ids] : archs.items()) {
      if (!ids.is_array()) continue;
      for (const auto& id : ids) {
        if (id.is_string()) ids_by_arch[arch].push_back(id.get<std::string>());
      }
    }
  }
  return ids_by_arch;
}

// One plan per zoo class (weight from its real ids and LLM share, its example config), and the
// plans' indexes by task.
Status PlanClasses(const std::map<std::string, std::vector<std::string>>& ids_by_arch,
                   std::vector<ClassPlan>* plans,
                   std::map<std::string, std::vector<size_t>>* by_task) {
  for (const auto& a : zoo::SupportedArchitectures()) {
    ClassPlan p;
    p.info = a;
    auto it = ids_by_arch.find(a.arch);
    if (it != ids_by_arch.end()) p.real_ids = it->second;
    p.weight = 1.0 + static_cast<double>(p.real_ids.size());
    auto llm = LlmShares().find(a.arch);
    if (llm != LlmShares().end()) p.weight += llm->second * 2980;
    auto ex = zoo::ExampleConfig(a.arch);
    if (!ex.ok()) return ex.status();
    p.bases.push_back(*ex);
    (*by_task)[a.task].push_back(plans->size());
    plans->push_back(std::move(p));
  }
  return OkStatus();
}

// Rows per class: task shares restricted to the zoo's tasks (a zoo task without a target share
// gets 0.5%), then within a task one row per class when there is room, the rest by popularity.
void AssignCounts(int64_t count, std::map<std::string, std::vector<size_t>>& by_task,
                  std::vector<ClassPlan>* plans) {
  std::vector<std::string> tasks;
  std::vector<double> task_shares;
  for (const auto& [task, idx] : by_task) {
    tasks.push_back(task);
    auto t = TargetTaskMix().find(task);
    task_shares.push_back(t == TargetTaskMix().end() ? 0.005 : t->second);
  }
  const std::vector<int64_t> per_task = Apportion(task_shares, count);
  for (size_t t = 0; t < tasks.size(); ++t) {
    const auto& idx = by_task[tasks[t]];
    std::vector<double> w;
    for (size_t i : idx) w.push_back((*plans)[i].weight);
    const int64_t floor = per_task[t] >= static_cast<int64_t>(idx.size()) ? 1 : 0;
    const auto counts = Apportion(w, per_task[t] - floor * static_cast<int64_t>(idx.size()));
    for (size_t k = 0; k < idx.size(); ++k) (*plans)[idx[k]].count = counts[k] + floor;
  }
}

// Row specs (class, ordinal), shuffled so any prefix is a fair mix.
std::vector<std::pair<uint32_t, uint32_t>> ShuffledSpecs(const std::vector<ClassPlan>& plans,
                                                         int64_t count, uint64_t seed) {
  std::vector<std::pair<uint32_t, uint32_t>> specs;
  specs.reserve(static_cast<size_t>(count));
  for (size_t c = 0; c < plans.size(); ++c) {
    for (int64_t i = 0; i < plans[c].count; ++i) {
      specs.push_back({static_cast<uint32_t>(c), static_cast<uint32_t>(i)});
    }
  }
  std::mt19937_64 shuffle_rng(Mix(seed, 0x5eed));
  std::shuffle(specs.begin(), specs.end(), shuffle_rng);
  return specs;
}

// Row `i` of class plan `c`: a real id while they last, else a generated one; a varied config
// (its base if the family rejects the variation).
StatusOr<Row> MakeRow(const ClassPlan& p, uint32_t c, uint32_t i, uint64_t seed,
                      std::set<std::string>* used_ids, GenerateStats* stats) {
  std::mt19937_64 rng(Mix(Mix(seed, c), i));
  Row r;
  r.task = p.info.task;
  r.arch = p.info.arch;
  r.family = p.info.family;
  if (i < p.real_ids.size() && !used_ids->count(p.real_ids[i])) {
    r.id = p.real_ids[i];
    ++stats->real_ids;
  } else {
    // Classes of one family share the name stem: two can draw the same org and suffix.
    const std::string id = GeneratedId(p, i, rng);
    r.id = id;
    for (int k = 2; used_ids->count(r.id); ++k) r.id = id + "-v" + std::to_string(k);
  }
  used_ids->insert(r.id);
  const json& base = p.bases[i % p.bases.size()];
  json cfg = Vary(base, rng);
  cfg["architectures"] = {p.info.arch};
  auto tiny = zoo::TinyConfig(cfg, p.info.arch);
  if (!tiny.ok()) {  // a variation the family rejects: fall back to its base
    cfg = base;
    cfg["architectures"] = {p.info.arch};
    tiny = zoo::TinyConfig(cfg, p.info.arch);
    if (!tiny.ok()) {
      return Status(tiny.status().code(), p.info.arch + " example: " + tiny.status().message());
    }
  }
  r.config = std::move(cfg);
  r.tiny_config = std::move(*tiny);
  r.config_hash = zoo::ConfigHash(r.config);
  return r;
}

}  // namespace

StatusOr<GenerateStats> Generate(const GenerateOptions& opts, std::ostream& out) {
  if (opts.count <= 0) return InvalidArgumentError("count: must be > 0");
  TS_ASSIGN_OR_RETURN(json ptm, ReadJsonFile(opts.data_dir + "/ptm_naming_model_types.json"));
  std::vector<ClassPlan> plans;
  std::map<std::string, std::vector<size_t>> by_task;
  TS_RETURN_IF_ERROR(PlanClasses(IdsByArch(ptm), &plans, &by_task));
  AssignCounts(opts.count, by_task, &plans);
  GenerateStats stats;
  std::set<std::string> used_ids;
  for (const auto& [c, i] : ShuffledSpecs(plans, opts.count, opts.seed)) {
    TS_ASSIGN_OR_RETURN(Row r, MakeRow(plans[c], c, i, opts.seed, &used_ids, &stats));
    out << ToJsonLine(r) << '\n';
    ++stats.rows;
    ++stats.per_task[r.task];
    ++stats.per_arch[r.arch];
  }
  if (!out) return InternalError("write failed");
  return stats;
}

ImportStats Import(std::istream& in, std::ostream& out) {
  ImportStats st;
  std::string line;
  int64_t line_no = 0;
  std::map<std::string, std::string> family_of;
  for (const auto& a : zoo::SupportedArchitectures()) family_of[a.arch] = a.family;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto fail = [&](const std::string& what) {
      st.errors.push_back("line " + std::to_string(line_no) + ": " + what);
    };
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded()) {
      fail("not valid JSON");
      continue;
    }
    if (!j.is_object()) {
      fail("expected a JSON object");
      continue;
    }
    if (!j.contains("id") || !j["id"].is_string() || j["id"].get<std::string>().empty()) {
      fail("id: missing or not a string");
      continue;
    }
    if (!j.contains("pipeline_tag") || !j["pipeline_tag"].is_string()) {
      fail("pipeline_tag: missing or not a string");
      continue;
    }
    if (!j.contains("architectures") || !j["architectures"].is_array() || j["architectures"].empty() ||
        !j["architectures"][0].is_string()) {
      fail("architectures: missing or not a non-empty array of strings");
      continue;
    }
    if (j.contains("config") && !j["config"].is_null() && !j["config"].is_object()) {
      fail("config: not an object");
      continue;
    }
    Row r;
    r.id = j["id"];
    r.task = j["pipeline_tag"];
    r.arch = j["architectures"][0];
    const bool supported = family_of.count(r.arch) > 0;
    if (j.contains("config") && j["config"].is_object()) {
      r.config = j["config"];
    } else if (supported) {
      r.config = *zoo::ExampleConfig(r.arch);
    } else {
      r.config = json::object();
    }
    r.config["architectures"] = j["architectures"];
    r.family = r.config.value("model_type", supported ? family_of[r.arch] : std::string());
    if (supported) {
      auto tiny = zoo::TinyConfig(r.config, r.arch);
      if (!tiny.ok()) {
        fail("config: " + tiny.status().message());
        continue;
      }
      r.tiny_config = *tiny;
    } else {
      ++st.unsupported;
    }
    r.config_hash = zoo::ConfigHash(r.config);
    out << ToJsonLine(r) << '\n';
    ++st.imported;
  }
  return st;
}

std::vector<Row> StratifiedSample(const std::vector<Row>& rows, int64_t n, uint64_t seed) {
  std::map<std::string, std::map<std::string, std::vector<size_t>>> groups;  // task -> arch -> rows
  for (size_t i = 0; i < rows.size(); ++i) groups[rows[i].task][rows[i].arch].push_back(i);
  std::vector<std::string> tasks;
  std::vector<double> shares;
  for (const auto& [task, archs] : groups) {
    size_t total = 0;
    for (const auto& [a, v] : archs) total += v.size();
    tasks.push_back(task);
    shares.push_back(static_cast<double>(total));
  }
  n = std::min<int64_t>(n, static_cast<int64_t>(rows.size()));
  std::vector<int64_t> alloc = Apportion(shares, n);
  // Every task present gets at least one row, taken from the largest allocations.
  for (size_t t = 0; t < alloc.size(); ++t) {
    if (alloc[t] > 0 || n < static_cast<int64_t>(tasks.size())) continue;
    auto donor = std::max_element(alloc.begin(), alloc.end());
    if (*donor > 1) {
      --*donor;
      alloc[t] = 1;
    }
  }
  std::vector<Row> out;
  for (size_t t = 0; t < tasks.size(); ++t) {
    auto& archs = groups[tasks[t]];
    std::vector<std::vector<size_t>*> lists;
    for (auto& [a, v] : archs) {
      std::mt19937_64 rng(Mix(seed, std::hash<std::string>()(a)));
      std::shuffle(v.begin(), v.end(), rng);
      lists.push_back(&v);
    }
    // Round-robin over classes, most popular first: stratified by class inside the task.
    std::stable_sort(lists.begin(), lists.end(), [](auto* a, auto* b) { return a->size() > b->size(); });
    int64_t taken = 0;
    for (size_t round = 0; taken < alloc[t]; ++round) {
      bool any = false;
      for (auto* l : lists) {
        if (round < l->size() && taken < alloc[t]) {
          out.push_back(rows[(*l)[round]]);
          ++taken;
          any = true;
        }
      }
      if (!any) break;
    }
  }
  return out;
}

}  // namespace ts::catalog
