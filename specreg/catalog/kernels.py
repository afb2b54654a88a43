"""Catalog entries SR900–SR999: kernel inputs shared by every kernel family."""

from specreg.catalog import ErrorEntry

ENTRIES = (
    ErrorEntry(
        code="SR900",
        title="Kernel input has the wrong shape",
        meaning="A tensor passed to a kernel does not have the shape its contract requires.",
        when="Any kernel wrapper, before launch: it checks every input's rank and sizes.",
        solutions=(
            "Compare the shapes in the message with the kernel's contract (docs: Kernels).",
            "Check that batch, width and vocab sizes agree across the inputs.",
        ),
        example_fix=(
            "# before\nverify(candidates[:, :-1], target_logits)\n"
            "# after\nverify(candidates, target_logits)  # [b, n] and [b, n, V]"
        ),
    ),
    ErrorEntry(
        code="SR901",
        title="Kernel input has the wrong dtype",
        meaning="A tensor passed to a kernel has a dtype its contract does not accept.",
        when="Any kernel wrapper, before launch.",
        solutions=(
            "Cast the tensor to one of the accepted dtypes the message lists.",
            "Index tensors are int32 or int64; probabilities are floating point.",
        ),
        example_fix="# before\ncandidates.float()\n# after\ncandidates.long()",
    ),
    ErrorEntry(
        code="SR902",
        title="Kernel inputs are on different devices",
        meaning="All tensors of one kernel call must live on one device.",
        when="Any kernel wrapper, before launch.",
        solutions=("Move every input to the same device (`.to(device)`).",),
        example_fix="# before\nverify(tokens.cpu(), logits.cuda())\n# after\nverify(tokens.cuda(), logits.cuda())",
    ),
    ErrorEntry(
        code="SR903",
        title="Kernel index out of range",
        meaning=(
            "An index tensor holds a value outside the range it indexes (a token id at or above "
            "the vocab size, a negative position, a request slot past the pool). specreg never "
            "reads or writes out of bounds: it raises this error instead."
        ),
        when="Kernel wrappers check index ranges before launch on the CPU path and on request on GPU.",
        solutions=(
            "Check the producer of the index tensor; the message names the tensor and the bad value.",
            "Token ids must be < vocab size; slots must be < the pool size.",
        ),
        example_fix="# before\ncandidates[0, 1] = vocab_size\n# after\ncandidates[0, 1] = vocab_size - 1",
    ),
    ErrorEntry(
        code="SR904",
        title="Kernel input holds invalid values",
        meaning=(
            "A probability tensor holds NaN, infinity or negative values, or a row that sums to "
            "zero where a distribution is needed; or a scalar argument is outside its range."
        ),
        when="Sampling and verification kernels checking their float inputs before launch.",
        solutions=(
            "Compute probabilities with softmax in float32.",
            "Check the temperature is positive and the logits are finite.",
        ),
        example_fix="# before\nprobs = logits / T\n# after\nprobs = torch.softmax(logits.float() / T, dim=-1)",
    ),
)
