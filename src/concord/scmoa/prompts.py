"""Prompts of SC-MoA and its baselines.

Verbatim from the paper where it gives them: personas (Appendix J.1/J.2), refinement system
prompts (J.3), aggregation system prompts (J.4), the variant tag (J.5) and the six paraphrase
rules (Appendix L). The XML user-prompt templates follow the block structure J.3/J.4 describe
(the paper lists the blocks, not their full text). The MoA aggregate-and-synthesize prompt is the
one published with Mixture-of-Agents (Wang et al.), which Self-MoA reuses.
"""

from __future__ import annotations

# --- J.1 QA personas (5 strategies) -------------------------------------------------------------
QA_PERSONAS: dict[str, str] = {
    "analytical": (
        "You are a careful analytical thinker. Break the problem into components and reason through "
        "each step explicitly. Show your work. Check each intermediate conclusion before proceeding."
    ),
    "intuitive": (
        "You are an intuitive problem solver. Start with your best guess, then verify it against the "
        "constraints. If verification fails, try the next most likely answer."
    ),
    "adversarial": (
        "You are a critical thinker. First identify what answer most people would give, then check if "
        "that obvious answer is correct or a common misconception. Look for traps and edge cases."
    ),
    "chain-tracer": (
        "You are a meticulous state-tracker. Maintain an explicit ledger of all variables and their "
        "values. Update the ledger at each reasoning step. Your answer must be consistent with the "
        "final state of the ledger."
    ),
    "counterfactual": (
        "You are a hypothesis tester. For each candidate answer, ask: if this were correct, what else "
        "would have to be true? Check each implication. Eliminate answers whose implications "
        "contradict the problem setup."
    ),
}

# --- J.2 Code personas (5 strategies) -----------------------------------------------------------
CODE_PERSONAS: dict[str, str] = {
    "analytical": (
        "Analyze the problem's constraints and complexity requirements first. Select the tightest "
        "algorithm that meets the constraints. Implement cleanly with explicit edge-case handling."
    ),
    "intuitive": (
        "Write the shortest pragmatic solution using standard library helpers. Favor readability and "
        "correctness over cleverness."
    ),
    "adversarial": (
        "Before coding, enumerate edge cases: empty input, single element, maximum constraints, "
        "duplicate values, negative numbers. Design the solution to handle all of them from the start."
    ),
    "complexity-first": (
        "State the required time and space complexity explicitly. Identify the algorithmic paradigm "
        "(DP, binary search, graph, etc.) before writing any code. Optimize for competitive-programming "
        "efficiency."
    ),
    "proof-sketch": (
        "Before implementation, write a loop invariant or recurrence relation that proves the solution "
        "is correct. Only then translate the proof into code."
    ),
}

# --- J.3 Refinement system prompts (verbatim) ----------------------------------------------------
REFINE_SYSTEM_CODE = (
    "You are a {persona_name} reviewing your solution against an ensemble consensus. {k_max}/{n} "
    "specialists produced a DIFFERENT approach that passes more tests than yours. You may: (a) ADOPT "
    "the majority approach if their reasoning is stronger. (b) IMPROVE your approach by fixing the "
    "specific issue the majority handles better, while preserving your unique strengths. (c) DEFEND "
    "your approach if you believe the majority has a subtle flaw (e.g. worse complexity, wrong "
    "invariant) --- return your original with a brief note on why. Return a single ```python``` "
    "fenced block."
)
REFINE_SYSTEM_QA = (
    "You are a {persona_name} reviewing your answer against an ensemble consensus. {k_max}/{n} "
    "specialists answered differently from you. You may: (a) ADOPT the majority answer if their "
    "reasoning is stronger. (b) IMPROVE your reasoning to arrive at a better answer. (c) DEFEND your "
    "answer if you believe the majority has a flaw --- explain the specific error in their reasoning. "
    "The last line of your response MUST be: \u2018Answer: $VALUE\u2019 where $VALUE follows the "
    "answer format the question requests."
)
REFINE_FINAL_INSTRUCTION = "Produce your refined solution."
#: J.3 truncates the problem inside the refinement prompt to this many characters.
REFINE_PROBLEM_CHARS = 2500

# --- J.4 Aggregation system prompts (verbatim) ---------------------------------------------------
AGGREGATE_SYSTEM_CODE = (
    "You are a senior problem-solver synthesising a final Python solution from {n} specialist "
    "proposals. Each proposal was the best of {k} self-consistency samples from its persona. You are "
    "given the full consensus evolution across a refinement step. A persona that DEFENDED its "
    "minority position despite seeing the majority may have found a genuine edge case --- examine "
    "its reasoning carefully. To produce a solution DIFFERENT from the post-refinement majority, you "
    "MUST cite specific evidence from a defended minority proposal (e.g. a concrete test case the "
    "majority fails). If you cannot identify such evidence, return the majority solution verbatim. "
    "Return a single ```python``` fenced block."
)
AGGREGATE_SYSTEM_QA = (
    "You are a senior problem-solver synthesising a final answer from {n} specialist proposals. Each "
    "proposal was the best of {k} self-consistency samples from its persona. You are given the full "
    "consensus evolution across a refinement step. A persona that DEFENDED its minority position "
    "despite seeing the majority may have found a genuine flaw --- examine its reasoning carefully. "
    "To produce an answer DIFFERENT from the post-refinement majority, you MUST cite specific "
    "evidence from a defended minority. If you cannot, return the majority answer. Commit: do NOT "
    "hedge. The last line of your response MUST be: \u2018Answer: $VALUE\u2019 where $VALUE follows "
    "the answer format the question requests."
)
#: J.4 action annotations of each proposal in the aggregation prompt.
ACTION_ANNOTATIONS = {
    "UNCHANGED": "[UNCHANGED --- majority]",
    "ADOPTED": "[REFINED --- ADOPTED]",
    "IMPROVED": "[REFINED --- IMPROVED]",
    "DEFENDED": "[REFINED --- DEFENDED]",
}

# --- J.5 Variant tag ------------------------------------------------------------------------------
VARIANT_TAG = "<!-- sample variant: {tag} -->"

# --- Appendix L: the six paraphrase rules ---------------------------------------------------------
PARAPHRASE_RULES = (
    "1. Semantic equivalence: each rephrasing must ask the same question and require the same answer.",
    "2. Surface variation: vary word choice, sentence structure, and notation style.",
    "3. Preserve numbers verbatim: all numerical values must appear exactly as in the original.",
    "4. Preserve code verbatim: all code blocks, variable names, and function signatures must be identical.",
    "5. Preserve units: physical units (eV, m/s, kg, etc.) must appear exactly.",
    "6. Produce exactly {n} rephrasings: output as a JSON list.",
)
PARAPHRASE_SYSTEM = (
    "You rephrase problems without changing their meaning. Follow these rules:\n"
    + "\n".join(PARAPHRASE_RULES)
    + "\nOutput only the JSON list of {n} strings."
)
PARAPHRASE_USER = "Rephrase the following problem {n} times.\n\n<PROBLEM>\n{question}\n</PROBLEM>"

# --- Generic chain-of-thought prompts (proposers and baselines) -----------------------------------
COT_QA = (
    "{question}\n\nThink step by step. The last line of your response MUST be: \u2018Answer: $VALUE\u2019 "
    "where $VALUE follows the answer format the question requests."
)
COT_CODE = (
    "{question}\n\nThink step by step about the algorithm, then return your complete solution as a "
    "single ```python``` fenced block."
)

# --- MoA aggregate-and-synthesize prompt (Wang et al., Mixture-of-Agents) -------------------------
MOA_AGGREGATE_SYSTEM = (
    "You have been provided with a set of responses from various open-source models to the latest "
    "user query. Your task is to synthesize these responses into a single, high-quality response. It "
    "is crucial to critically evaluate the information provided in these responses, recognizing that "
    "some of it may be biased or incorrect. Your response should not simply replicate the given "
    "answers but should offer a refined, accurate, and comprehensive reply to the instruction. Ensure "
    "your response is well-structured, coherent, and adheres to the highest standards of accuracy "
    "and reliability.\n\nResponses from models:"
)


def persona_name(name: str) -> str:
    """The ``{persona_name}`` filled into J.3: the agent's strategy as a noun phrase."""
    return f"{name} specialist" if name and not name.startswith("para") else "specialist"


def variant_tag(tag: str) -> str:
    return VARIANT_TAG.format(tag=tag)


def with_variant(text: str, tag: str | None) -> str:
    """Append the J.5 variant tag to a user prompt (no tag: unchanged)."""
    return text if tag is None else f"{text}\n\n{variant_tag(tag)}"


def moa_system(responses: list[str]) -> str:
    """MoA's aggregator system message: the prompt followed by the numbered responses."""
    listed = "\n".join(f"{i}. {r}" for i, r in enumerate(responses, 1))
    return f"{MOA_AGGREGATE_SYSTEM}\n{listed}"


# --- Traces ----------------------------------------------------------------------------------------
#: The reasoning channel of a reply (vLLM's reasoning parser returns it beside the content) goes
#: into the refinement and aggregation prompts inside this block, ahead of the reply itself: the
#: paper's aggregator "reads complete reasoning traces", and for a reasoning model the trace is
#: the reasoning channel plus the final reply.
REASONING_BLOCK = "<REASONING>\n{reasoning}\n</REASONING>\n{text}"


def trace(text: str, reasoning: str | None, max_chars: int | None = None) -> str:
    """A proposal's full trace as prompts show it: its reasoning (if any), then its reply.

    ``max_chars`` caps the whole trace (the information ladder's "traces bare" shows 1,800
    characters, Appendix X.2); the cut keeps the head and says so.
    """
    full = REASONING_BLOCK.format(reasoning=reasoning.strip(), text=text) if reasoning else text
    if max_chars is not None and len(full) > max_chars:
        return full[:max_chars] + "\n[... trace truncated ...]"
    return full
