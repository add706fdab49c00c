# Shared by all rule files -- paths, JSON parameters, target lists.
import json
import os
import re
from pathlib import Path

RESULTS = config.get("results_dir", "results")
LOGS = f"{RESULTS}/logs"
BENCH = f"{RESULTS}/benchmarks"
CACHE = f"{RESULTS}/.cache"  # resumable state, deliberately outside declared outputs

MODELS = list(config.get("models") or {})
BENCHMARKS = list(config.get("benchmarks") or {})
ARMS = list(config.get("arms") or [])
SEEDS = [int(s) for s in config.get("seeds") or [0]]
# The CoRE experiment runs when the config names its models, benchmarks and arms; a config for
# another paper alone (e.g. config/paper_scmoa.yaml) leaves them out.
CORE_ENABLED = bool(MODELS and BENCHMARKS and ARMS)
ENGINE = config.get("engine", {})
ON_GPU = ENGINE.get("backend", "hf") == "vllm"


def get_final_output():
    """Every final output of the run: `rule all` requests exactly these.

    One function per paper computes its targets (core_targets in rules/core/common.smk,
    fmv_targets in rules/fmv/common.smk, scmoa_targets in rules/scmoa/common.smk); each is
    empty when its paper is switched off or not configured.
    """
    return paper_outputs() + scorecard_targets()


def paper_outputs():
    """The three papers' outputs (what the scorecard compares with the printed numbers)."""
    data = expand(f"{RESULTS}/data/{{benchmark}}.jsonl", benchmark=BENCHMARKS)
    return data + core_targets() + fmv_targets() + scmoa_targets()


def scorecard_targets():
    """The reproduction scorecard's pages (rules/scorecard.smk)."""
    from concord import scorecard

    return [f"{RESULTS}/scorecard/{name}" for name in scorecard.output_names()]


def alternatives(values):
    """A wildcard constraint accepting exactly these values."""
    return "|".join(re.escape(str(v)) for v in values)


def as_json(obj):
    """A config subset as a compact JSON string (rules pass it quoted with `:q`)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def model_spec(wildcards):
    return as_json(config["models"][wildcards.model])


def benchmark_spec(wildcards):
    return as_json(config["benchmarks"][wildcards.benchmark])


def task_of(benchmark):
    return config["benchmarks"][benchmark].get("task", "math")


def section(name, default=None):
    return config.get(name, {} if default is None else default)


def first_seed():
    return SEEDS[0]


# GPUs each GPU job reserves while its engine runs on CPU, `cluster.rehearse_gpus` (0, except on a
# workstation's Slurm with fake GPUs, config/slurm_local.yaml: the job asks Slurm for them and
# sees CUDA_VISIBLE_DEVICES, and still computes on CPU with one process).
REHEARSE_GPUS = int(section("cluster").get("rehearse_gpus", 0))


def gpu_count(n=1):
    """GPUs a job asks for: only when the engine runs on GPUs (vLLM), else a CPU job."""
    return n if ON_GPU else REHEARSE_GPUS


def budgeted(rule_name, key, gpus):
    """A GPU job's `runtime` or `mem_mb` from its workload (concord.cluster.budget), i.e. model
    size x tokens / an assumed throughput per GPU type (cluster section of config/schema.yaml)."""

    def value(wildcards):
        from concord.cluster.budget import job_resources

        return job_resources(rule_name, config, dict(wildcards.items()), gpus, ON_GPU)[key]

    return value


def processes_per_gpu_job(wildcards, resources):
    """accelerate processes of a training job: one per GPU on GPUs, one on CPU."""
    return max(1, resources.gpu) if ON_GPU else 1


KEEP_TRAINED_MODELS = bool(config.get("keep_trained_models", False))


def trained_model(path):
    """A trained model's directory: intermediate by default (Snakemake removes it once every job
    that reads it has run; the audit keeps its hash), kept with `keep_trained_models: true`."""
    return directory(path) if KEEP_TRAINED_MODELS else temp(directory(path))


def audited(command):
    """A rule's shell command followed by the registration of the job's outputs in the run
    manifest (content hashes; rules/audit.smk checks that every rule uses it)."""
    from concord.audit import register_command

    return command + register_command(RESULTS)


# Captions live in the checkout's report/ folder (beside rules/), whichever Snakefile includes this.
REPORT_DIR = os.path.normpath(os.path.join(str(workflow.current_basedir), "..", "report"))


def in_report(path, caption, category, subcategory=None, **labels):
    """Mark an output for the HTML report (`snakemake --report results/report.html`). Captions are
    reStructuredText under report/ (Jinja sees `snakemake.params`, `.wildcards`, `.config`); a
    table's caption embeds its CSV (`csv-table`), so the table is read in the page itself."""
    caption_file = os.path.join(REPORT_DIR, caption)
    return report(path, caption=caption_file, category=category, subcategory=subcategory, labels=labels or None)


def report_caption(folder, stem, fallback="table"):
    """`folder/stem.rst` when it exists, else the folder's generic caption."""
    name = f"{folder}/{stem}.rst"
    return name if os.path.isfile(os.path.join(REPORT_DIR, name)) else f"{folder}/{fallback}.rst"
