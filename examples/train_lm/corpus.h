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
// Packed documents: the text's paragraphs (runs of bytes between blank lines)
// drawn at random, each from its start, up to seq + 1 bytes of it, packed one
// after another until batch * seq tokens (the last cut to fit);
// cu_seqlens [documents + 1] gives each one's tokens (gka_forward_varlen).
struct PackedBatch : Batch {
    std::vector<int64_t> cu_seqlens;
};
class Packer {
public:
    explicit Packer(const std::vector<uint8_t> &text);  // indexes its paragraphs; keeps a reference
    PackedBatch batch(int batch, int seq, std::mt19937_64 &rng) const;

private:
    const std::vector<uint8_t> &text;
    std::vector<std::pair<size_t, size_t>> paragraphs;  // [start, end) of each
};
// Batch k of `count` fixed evaluation batches, whose windows are spread evenly
// over the text.
Batch evaluation_batch(const std::vector<uint8_t> &text, int batch, int seq, int k, int count);

}  // namespace lm
