// The training text: a file, or every regular file of a directory (symbolic
// links skipped, so /usr/share/common-licenses/GPL does not repeat GPL-3),
// read as bytes and split into a training head and a validation tail.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace lm {

struct Corpus {
    std::vector<uint8_t> train, validation;

    static Corpus load(const std::string &path, double validation_fraction);
};

// Inputs and next-byte targets, [batch][seq] each.
struct Batch {
    std::vector<uint8_t> inputs, targets;
};

// batch windows of seq + 1 bytes at random offsets.
Batch random_batch(const std::vector<uint8_t> &text, int batch, int seq, std::mt19937_64 &rng);
// Batch k of `count` fixed evaluation batches, whose windows are spread evenly
// over the text.
Batch evaluation_batch(const std::vector<uint8_t> &text, int batch, int seq, int k, int count);

}  // namespace lm
