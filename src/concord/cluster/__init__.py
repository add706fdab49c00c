"""Running the workflow on a Slurm cluster: a single-node cluster on this machine
(`local_slurm`), what a node can ever run (`limits`), and a GPU budget of the paper grid
(`budget`). `local_slurm` uses the standard library only, so that `scripts/slurm_local.sh`
runs before any virtual environment exists."""
