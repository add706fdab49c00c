# Before the first job is submitted to Slurm (`--profile slurm`; never for local runs or -n):
# say which status command the executor plugin uses and why, and stop the run, naming the rule
# and the partition limit, when a planned job asks for more than any node of its partition has
# (Slurm would leave it PENDING forever). concord.cluster.limits does the work.


def _slurm_preflight():
    plugin = workflow.executor_plugin
    if plugin is None or plugin.cli_prefix != "slurm":
        return
    from concord.cluster import limits as _limits

    logger.info(_limits.status_command_summary(workflow.executor_settings))
    requests = [
        _limits.request_of(job.rule.name, job.resources, job.threads)
        for job in workflow.dag.needrun_jobs()
        if not job.is_local
    ]
    try:
        _limits.check_jobs(requests)
    except _limits.ClusterLimitError as error:
        raise WorkflowError(str(error)) from None


onstart:
    _slurm_preflight()
