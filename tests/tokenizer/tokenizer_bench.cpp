// Measures encode throughput on one thread: the whole input as one text, and line by line.
// Prints one JSON line per mode with MB/s (10^6 bytes per second) for the first encode
// (fresh tokenizer, empty word cache) and the median of the repeats after it, by wall clock
// and by the thread's CPU time (steadier on a shared machine), plus a hash of the ids so that
// another implementation's output can be checked against it.
//
//   tokenizer_bench --model DIR --input FILE [--repeat 3]
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <fstream>
#include <iostream>
#include <sstream>

#include "tokenizer/tokenizer.h"

namespace {

// FNV-1a over the ids as little-endian 32-bit integers (tools/tokenizer_bench_hf.py does the
// same).
uint64_t hash_ids(const std::vector<int>& ids, uint64_t h = 1469598103934665603ull) {
  for (const int id : ids) {
    auto v = static_cast<uint32_t>(id);
    for (int i = 0; i < 4; ++i) {
      h ^= v & 0xFF;
      h *= 1099511628211ull;
      v >>= 8;
    }
  }
  return h;
}

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  std::size_t start = 0;
  while (true) {
    const std::size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) {
      lines.push_back(text.substr(start));
      return lines;
    }
    lines.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Run {
  double seconds = 0;
  double cpu_seconds = 0;
  std::size_t tokens = 0;
  uint64_t hash = 0;
};

template <typename Encode>
nlohmann::json measure(const std::string& mode, std::size_t bytes, int repeat, Encode&& encode) {
  std::vector<Run> runs;
  for (int i = 0; i < 1 + repeat; ++i) {
    const double cpu_start = thread_cpu_seconds();
    const auto start = std::chrono::steady_clock::now();
    Run run = encode();
    run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    run.cpu_seconds = thread_cpu_seconds() - cpu_start;
    runs.push_back(run);
  }
  std::vector<double> wall, cpu;
  for (std::size_t i = runs.size() > 1 ? 1 : 0; i < runs.size(); ++i) {
    wall.push_back(runs[i].seconds);
    cpu.push_back(runs[i].cpu_seconds);
  }
  const double mb = static_cast<double>(bytes) / 1e6;
  return {{"impl", "nanovllm"},
          {"mode", mode},
          {"bytes", bytes},
          {"tokens", runs[0].tokens},
          {"ids_fnv1a", runs[0].hash},
          {"first_s", runs[0].seconds},
          {"median_s", median(wall)},
          {"median_cpu_s", median(cpu)},
          {"first_mb_per_s", mb / runs[0].seconds},
          {"median_mb_per_s", mb / median(wall)},
          {"median_cpu_mb_per_s", mb / median(cpu)}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Tokenizer encode throughput on one thread");
  std::string model, input;
  int repeat = 3;
  app.add_option("--model", model, "directory with tokenizer.json")->required();
  app.add_option("--input", input, "UTF-8 text file")->required();
  app.add_option("--repeat", repeat, "timed encodes after the first");
  CLI11_PARSE(app, argc, argv);

  std::ifstream in(input, std::ios::binary);
  if (!in) {
    std::cerr << "cannot open " << input << "\n";
    return 1;
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();

  try {
    {
      const nanovllm::Tokenizer tokenizer = nanovllm::Tokenizer::from_dir(model);
      std::cout << measure("text", text.size(), repeat,
                           [&] {
                             const std::vector<int> ids = tokenizer.encode(text);
                             return Run{.tokens = ids.size(), .hash = hash_ids(ids)};
                           })
                       .dump()
                << std::endl;
    }
    {
      const nanovllm::Tokenizer tokenizer = nanovllm::Tokenizer::from_dir(model);
      const std::vector<std::string_view> lines = split_lines(text);
      std::cout << measure("lines", text.size(), repeat,
                           [&] {
                             Run run{.hash = 1469598103934665603ull};
                             for (const std::string_view line : lines) {
                               const std::vector<int> ids = tokenizer.encode(line);
                               run.tokens += ids.size();
                               run.hash = hash_ids(ids, run.hash);
                             }
                             return run;
                           })
                       .dump()
                << std::endl;
    }
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
