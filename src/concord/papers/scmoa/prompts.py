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
# --- Section 3's controlled setting (pre-refinement synthesis): J.4 without the refinement step --
# The paper runs Section 3 (Tables 29-30) as "synthesis vs. voting on the same proposals" before
# refinement but prints no prompt for it. These are J.4's prompts with each mention of the
# refinement step taken out and nothing else changed (docs/fidelity.md): "the full consensus
# evolution across a refinement step" -> "the consensus among the proposals"; "A persona that
# DEFENDED its minority position despite seeing the majority" -> "A persona in a minority
# cluster"; "post-refinement majority" -> "majority"; "a defended minority" -> "a minority".
AGGREGATE_SYSTEM_CODE_PRE = (
    "You are a senior problem-solver synthesising a final Python solution from {n} specialist "
    "proposals. Each proposal was the best of {k} self-consistency samples from its persona. You are "
    "given the consensus among the proposals. A persona in a minority cluster may have found a "
    "genuine edge case --- examine its reasoning carefully. To produce a solution DIFFERENT from the "
    "majority, you MUST cite specific evidence from a minority proposal (e.g. a concrete test case the "
    "majority fails). If you cannot identify such evidence, return the majority solution verbatim. "
    "Return a single ```python``` fenced block."
)
AGGREGATE_SYSTEM_QA_PRE = (
    "You are a senior problem-solver synthesising a final answer from {n} specialist proposals. Each "
    "proposal was the best of {k} self-consistency samples from its persona. You are given the "
    "consensus among the proposals. A persona in a minority cluster may have found a genuine flaw --- "
    "examine its reasoning carefully. To produce an answer DIFFERENT from the majority, you MUST cite "
    "specific evidence from a minority. If you cannot, return the majority answer. Commit: do NOT "
    "hedge. The last line of your response MUST be: \u2018Answer: $VALUE\u2019 where $VALUE follows "
    "the answer format the question requests."
)
#: Pre-refinement annotation of each proposal: its true cluster role (J.4's annotations without
#: the refinement action, which did not happen).
CLUSTER_ANNOTATIONS = {"majority": "[majority]", "minority": "[minority]"}

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


# --- TextGrad (Yuksekgonul et al., Nature 2025) -------------------------------------------------
# Test-time solution optimisation as the TextGrad reference code runs it for GPQA/MMLU
# (zou-group/textgrad: evaluation/solution_optimization.py, textgrad/loss.py MultiChoiceTestTime,
# textgrad/tasks/gpqa.py, textgrad/autograd/llm_backward_prompts.py,
# textgrad/optimizer/optimizer_prompts.py). Quoted prompt text, so the baseline is the published one.
TEXTGRAD_EVAL_SYSTEM = (
    "You are an intelligent assistant used as an evaluator, and part of an optimization system. You will analyze a "
    "solution to a multi-choice problem. Investigate the reasoning and answer. Do not try to solve the problem, only "
    "raise the potential issues and mistakes in the answer. Be creative, think about different perspectives, and be "
    "very critical."
)
TEXTGRAD_EVAL_INSTRUCTION = (
    "Below is a multi-choice question and a prediction. You are an expert scientist. Your job is to investigate the "
    "prediction. Critically go through reasoning steps, and see if there is a reason why the prediction could be "
    "incorrect.\nUse the Janusian Process. Think about whether alternative answers could be true. Raise creative and "
    "critical objections to the solution, when needed."
)
TEXTGRAD_EVAL_USER = "{instruction}\nQuestion: {question}\nAnswer by the language model: {prediction}"
TEXTGRAD_ROLE = "creative and precise solution and the prediction for the multiple choice question"
TEXTGRAD_BACKWARD_SYSTEM = (
    "You are part of an optimization system that improves a given text (i.e. the variable). You are the gradient "
    "(feedback) engine. Your only responsibility is to give intelligent and creative feedback and constructive "
    "criticism to variables, given an objective specified in <OBJECTIVE_FUNCTION> </OBJECTIVE_FUNCTION> tags. The "
    "variables may be solutions to problems, prompts to language models, code, or any other text-based variable. Pay "
    "attention to the role description of the variable, and the context in which it is used. You should assume that "
    "the variable will be used in a similar context in the future. Only provide strategies, explanations, and methods "
    "to change in the variable. DO NOT propose a new version of the variable, that will be the job of the optimizer. "
    "Your only job is to send feedback and criticism (compute 'gradients'). For instance, feedback can be in the form "
    "of 'Since language models have the X failure mode...', 'Adding X can fix this error because...', 'Removing X can "
    "improve the objective function because...', 'Changing X to Y would fix the mistake ...', that gets at the "
    "downstream objective.\nIf a variable is already working well (e.g. the objective function is perfect, an "
    "evaluation shows the response is accurate), you should not give feedback.\n"
)
TEXTGRAD_BACKWARD_USER = (
    "You will give feedback to a variable with the following role: <ROLE> {role} </ROLE>. Here is an evaluation of "
    "the variable using a language model:\n\n<LM_SYSTEM_PROMPT> {eval_system} </LM_SYSTEM_PROMPT>\n\n<LM_INPUT> "
    "{eval_input} </LM_INPUT>\n\n<LM_OUTPUT> {evaluation} </LM_OUTPUT>\n\n<OBJECTIVE_FUNCTION>Your goal is to give "
    "feedback and criticism to the variable given the above evaluation output. Our only goal is to improve the above "
    "metric, and nothing else. </OBJECTIVE_FUNCTION>\n\nWe are interested in giving feedback to the {role} for this "
    "conversation. Specifically, give feedback to the following span of text:\n\n<VARIABLE> {variable} </VARIABLE>"
    "\n\nGiven the above history, describe how the {role} could be improved to improve the <OBJECTIVE_FUNCTION>. Be "
    "very creative, critical, and intelligent.\n\n"
)
TEXTGRAD_OPTIMIZER_SYSTEM = (
    "You are part of an optimization system that improves text (i.e., variable). You will be asked to creatively and "
    "critically improve prompts, solutions to problems, code, or any other text-based variable. You will receive some "
    "feedback, and use the feedback to improve the variable. The feedback may be noisy, identify what is important "
    "and what is correct. Pay attention to the role description of the variable, and the context in which it is used. "
    "This is very important: You MUST give your response by sending the improved variable between "
    "<IMPROVED_VARIABLE> {improved variable} </IMPROVED_VARIABLE> tags. The text you send between the tags will "
    "directly replace the variable.\n"
)
TEXTGRAD_OPTIMIZER_USER = (
    "Here is the role of the variable you will improve: <ROLE>{role}</ROLE>.\n\nThe variable is the text within the "
    "following span: <VARIABLE> {variable} </VARIABLE>\n\nHere is the context and feedback we got for the variable:"
    "\n\n<CONTEXT><FEEDBACK>{feedback}</FEEDBACK></CONTEXT>\n\nImprove the variable ({role}) using the feedback "
    "provided in <FEEDBACK> tags.\nYou must follow the following constraints:\n\n<CONSTRAINTS>{constraint}"
    "</CONSTRAINTS>\n\nSend the improved variable in the following format:\n\n<IMPROVED_VARIABLE>{{the improved "
    "variable}}</IMPROVED_VARIABLE>\n\nSend ONLY the improved variable between the <IMPROVED_VARIABLE> tags, and "
    "nothing else."
)
#: Code: the test-time loss with unit-test supervision (evaluation/code_optimization/prompts.py).
TEXTGRAD_CODE_EVAL_SYSTEM = (
    "You are an intelligent assistant used as an evaluator, and part of an optimization system. \nYou will analyze a "
    "code implementation for a coding problem and unit test results. \nThe code will be tested with harder tests, so "
    "do not just check if the code passes the provided tests.\nThink about the correctness of the code and its "
    "performance in harder test cases.\nGive very concise feedback.\nInvestigate the code problem and the provided "
    "implementation. \nFor each failed unit test case, start analyzing it by saying \"The code did not pass this test "
    "because...\". \nExplain why the current implementation is not getting the expected output. Do not provide a "
    "revised implementation. Carefully \nsuggest why there are issues with the code and provide feedback.\n"
)
TEXTGRAD_CODE_EVAL_USER = (
    "You are a language model that evaluates a python code snippet.\n\n**The coding problem:**\n\n{problem}\n"
    "**{role}**{program}**\n\nThe test results:**\n\n{tests}\n"
)
TEXTGRAD_CONSTRAINT_QA = (
    "The last line of your response should be of the following format: 'Answer: $VALUE' (without quotes) where "
    "$VALUE follows the answer format the question requests."
)
TEXTGRAD_CONSTRAINT_CODE = "Return the complete solution as a single ```python``` fenced block."

# --- GoA (Graph-of-Agents, Yun et al., ICLR 2026) ------------------------------------------------
# The SC-MoA paper describes GoA's four stages (Appendix F); the wording of these prompts is concord's.
GOA_NODE_SYSTEM = (
    "You select the agents best suited to answer a question. You are given the question and a model card for "
    "each candidate agent. Rank the agents from most to least suitable."
)
GOA_NODE_USER = (
    "<QUESTION>\n{question}\n</QUESTION>\n\n<MODEL_CARDS>\n{cards}\n</MODEL_CARDS>\n\nReply with the agent "
    "names, most suitable first, one per line."
)
GOA_EDGE_SYSTEM = (
    "You are agent {me}. You read other agents' answers to the same question and score how relevant and "
    "useful each one is for answering it correctly, from 0 (useless) to 10 (decisive)."
)
GOA_EDGE_USER = (
    "<QUESTION>\n{question}\n</QUESTION>\n\n{responses}\n\nFor each response, write one line "
    "'<agent>: <score>' with a score from 0 to 10."
)
GOA_MESSAGE_SYSTEM = (
    "You are agent {me}. You answered a question; other agents whose answers you found relevant send you their "
    "responses, with how relevant you judged each (weights sum to 1). Revise your answer in light of them."
)
GOA_MEAN_POOL_SYSTEM = (
    "You are the meta agent. Synthesise one final answer from the agents' responses, giving each response "
    "weight according to its score (higher is more trustworthy)."
)

# --- Pairwise LLM judge (Zheng et al., 2023: MT-Bench "pair-v2", binary verdict) ----------------
JUDGE_SYSTEM = (
    "Please act as an impartial judge and evaluate the quality of the responses provided by two AI assistants to "
    "the user question displayed below. You should choose the assistant that follows the user's instructions and "
    "answers the user's question better. Your evaluation should consider factors such as the helpfulness, relevance, "
    "accuracy, depth, creativity, and level of detail of their responses. Begin your evaluation by comparing the two "
    "responses and provide a short explanation. Avoid any positional biases and ensure that the order in which the "
    "responses were presented does not influence your decision. Do not allow the length of the responses to "
    "influence your evaluation. Do not favor certain names of the assistants. Be as objective as possible. After "
    "providing your explanation, output your final verdict by strictly following this format: \"[[A]]\" if "
    "assistant A is better, \"[[B]]\" if assistant B is better."
)
JUDGE_USER = (
    "[User Question]\n{question}\n\n[The Start of Assistant A's Answer]\n{answer_a}\n[The End of Assistant A's "
    "Answer]\n\n[The Start of Assistant B's Answer]\n{answer_b}\n[The End of Assistant B's Answer]"
)
