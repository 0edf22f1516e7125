"""Concept checks for Chapter 7: Complexity and efficient attention."""

from __future__ import annotations

from . import Question

CHECKS = {
    "7.1": (
        Question(
            prompt=(
                "A self-attention layer has d_model = 512. From which sequence length "
                "T on do the T² matrix products (Q Kᵀ and the weighted sum of V) cost "
                "more FLOPs than the four projections (Q, K, V and the output)?"
            ),
            options=(
                "T = 512",
                "T = 1024",
                "T = 2048",
                "T = 23, about the root of 512",
            ),
            answer=1,
            why=(
                "At T = D the T² part is 4 T² D = 4 T D², half the projections' "
                "8 T D²: the projections still cost twice as much.",
                "The projections cost 4 × 2 T D² and the two T² products 2 × 2 T² D; "
                "they are equal when 4 T² D = 8 T D², that is at T = 2 D = 1024.",
                "At T = 2048 = 4 D the T² part already costs twice the projections; "
                "the crossing is earlier, at 2 D.",
                "Both terms grow with T, so T cancels once: the comparison is T "
                "against 2 D, not T² against D.",
            ),
        ),
    ),
    "7.2": (
        Question(
            prompt=(
                "FlashAttention computes attention exactly, tile by tile. Compared "
                "with the standard algorithm that writes the scores S and the weights "
                "P to the GPU's main memory, what does it change?"
            ),
            options=(
                "The FLOPs: it skips the tiles whose weights are small",
                "The bytes moved to and from main memory, and the memory kept: "
                "O(T) instead of O(T²)",
                "The result: it returns an approximation, close to the exact output",
                "The growth of its time with T: from quadratic to linear",
            ),
            answer=1,
            why=(
                "Every tile is computed: the chapter counts the same FLOPs for the "
                "blockwise loop as for the readable attention, exactly.",
                "S and P never leave the chip: each tile is used and dropped, and only "
                "Q, K, V, the output and two numbers per row touch main memory. The "
                "arithmetic is the same; the traffic and the memory are not.",
                "The online softmax rescales exactly: the chapter measures the "
                "blockwise output within 1e-5 of PyTorch's, the rounding of float32.",
                "It still does 4 T² d FLOPs per head, so its time still grows as T². "
                "It is faster on a GPU because it waits less for memory, not because "
                "it computes less.",
            ),
        ),
    ),
    "7.4": (
        Question(
            prompt=(
                "A cached decode step of the chapter's small GPT at batch 1 spends "
                "most of its time outside the matrix products. A server must answer "
                "many users at once. What raises its tokens per second the most?"
            ),
            options=(
                "More CPU threads for each step",
                "A faster attention kernel",
                "Decoding many users' sequences together, as one batch",
                "A smaller KV cache, with multi-query attention",
            ),
            answer=2,
            why=(
                "Threads split the work inside an operation; at batch 1 each operation "
                "is tiny, and the time between operations does not shrink.",
                "Attention is a small share of the step at batch 1; a faster kernel "
                "leaves the rest as it is.",
                "The fixed cost of a step (launching each operation, reading each "
                "weight matrix) is paid once for the whole batch: the chapter measures "
                "tokens per second growing from batch 1 to 8 to 64.",
                "A smaller cache lets more sequences fit in memory, but by itself it "
                "does not make a step at batch 1 faster: the step's time is not spent "
                "reading the cache.",
            ),
        ),
    ),
    "7.5": (
        Question(
            prompt=(
                "How many True entries (query-key pairs that may attend) does "
                "`sliding_window_mask(64, 16)` hold?"
            ),
            options=("1024", "904", "2080", "960"),
            answer=1,
            why=(
                "64 × 16 would give every query 16 keys, but the first 15 queries "
                "have fewer keys before them than the window allows.",
                "Every query sees itself and up to 15 keys before it: 64 × 16 minus "
                "the 15 × 16 / 2 = 120 pairs that the first queries lack, 904: about "
                "T × window, linear in T.",
                "2080 = 64 × 65 / 2 is the full causal mask, the window as long as "
                "the sequence.",
                "That counts 15 keys per query, forgetting that the window of 16 "
                "includes the query itself.",
            ),
        ),
    ),
    "7.6": (
        Question(
            prompt=(
                "Two processes each take half of a batch of 8 sequences, compute the "
                "mean loss over their half, and DistributedDataParallel all-reduces "
                "the gradients in the backward pass. What gradient does each process "
                "hold after `loss.backward()`?"
            ),
            options=(
                "The gradient of the mean loss over all 8 sequences, as one process "
                "computing on the whole batch would have it",
                "The sum of the two halves' gradients, twice the one-process gradient",
                "The gradient of its own half: DDP only keeps the weights equal",
                "The gradient of process 0, copied to process 1",
            ),
            answer=0,
            why=(
                "The all-reduce averages the two gradients, and with equal halves "
                "the mean of the two half-batch means is the mean over the batch: "
                "the chapter checks every gradient equal to the one-process step.",
                "DDP divides the all-reduced sum by the number of processes, so the "
                "gradient does not grow with the number of processes.",
                "The weights stay equal because every process applies the same "
                "averaged gradient; without the all-reduce they would drift apart.",
                "Process 0's weights are broadcast once, when DDP wraps the model; "
                "the gradients are averaged over all processes.",
            ),
        ),
    ),
}
