// Line-oriented front end for comparing this tokenizer with others: reads JSON requests on
// stdin, one per line, and writes one JSON reply per line.
//
//   tokenizer_driver TOKENIZER_JSON [TOKENIZER_CONFIG_JSON]
//   {"op": "encode", "text": s, "add_special_tokens": b}    -> {"ids": [...]}
//   {"op": "decode", "ids": [...], "skip_special_tokens": b} -> {"text": s}
//   {"op": "stream", "ids": [...], "skip_special_tokens": b} -> {"pieces": [...]}
//       (incremental detokenizer: one piece per id, then the piece from finish())
//   {"op": "normalize", "text": s}                            -> {"text": s}
//   {"op": "vocab_size"}                                      -> {"vocab_size": n}
// A request that fails gets {"error": message}.
#include <nlohmann/json.hpp>

#include <iostream>
#include <string>

#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"

namespace {

using nlohmann::json;

json handle(const nanovllm::Tokenizer& tokenizer, const json& request) {
  const std::string op = request.at("op").get<std::string>();
  if (op == "encode") {
    return {{"ids", tokenizer.encode(request.at("text").get<std::string>(),
                                     request.value("add_special_tokens", false))}};
  }
  if (op == "decode") {
    const auto ids = request.at("ids").get<std::vector<int>>();
    return {{"text", tokenizer.decode(ids, request.value("skip_special_tokens", false))}};
  }
  if (op == "stream") {
    nanovllm::IncrementalDetokenizer detokenizer(tokenizer,
                                                 request.value("skip_special_tokens", false));
    json pieces = json::array();
    for (const int id : request.at("ids").get<std::vector<int>>()) {
      pieces.push_back(detokenizer.push(id));
    }
    pieces.push_back(detokenizer.finish());
    return {{"pieces", pieces}};
  }
  if (op == "normalize") {
    return {{"text", tokenizer.impl().normalizer.normalize(request.at("text").get<std::string>())}};
  }
  if (op == "vocab_size") return {{"vocab_size", tokenizer.vocab_size()}};
  return {{"error", "unknown op " + op}};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::cerr << "usage: tokenizer_driver TOKENIZER_JSON [TOKENIZER_CONFIG_JSON]\n";
    return 2;
  }
  std::optional<std::filesystem::path> config;
  if (argc == 3) config = argv[2];
  std::optional<nanovllm::Tokenizer> tokenizer;
  try {
    tokenizer = nanovllm::Tokenizer::from_files(argv[1], config);
  } catch (const std::exception& e) {
    std::cout << json{{"error", e.what()}}.dump() << std::endl;
    return 1;
  }
  std::ios::sync_with_stdio(false);
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    json reply;
    try {
      reply = handle(*tokenizer, json::parse(line));
    } catch (const std::exception& e) {
      reply = {{"error", e.what()}};
    }
    std::cout << reply.dump() << '\n' << std::flush;
  }
  return 0;
}
