"""Test-time reinforcement learning (TTRL) with consensus rewards, on TRL's ``GRPOTrainer``.

Modules (import the one you need; heavy dependencies load only there):

* :mod:`concord.rl.batching` -- the step layout (vote over ``n_vote``, train on ``n_train``,
  over any number of processes) and gated, group-normalised advantages (pure functions);
* :mod:`concord.rl.rewards` -- the arm -> scorer registry (majority, ec, cisc, core; plug-ins
  such as FMV register themselves) and :class:`~concord.rl.rewards.ConsensusReward`, the TRL
  reward function that scores whole groups even when they straddle processes;
* :mod:`concord.rl.trainer` -- :class:`~concord.rl.trainer.ConsensusGRPOTrainer`: confidences,
  the training subset and the cohesiveness gate inside TRL;
* :mod:`concord.rl.diagnostics` -- gold-based per-step diagnostics (logging only);
* :mod:`concord.rl.settings` -- a job's resolved settings, batch layout, dtype and TRL's
  ``GRPOConfig`` (pure);
* :mod:`concord.rl.checkpoints` -- the last complete checkpoint and the per-step logs beside it;
* :mod:`concord.rl.validation` -- held-out questions, validation pass@1 every ``eval_every``
  steps, early stopping and the per-step log callback;
* :mod:`concord.rl.publish` -- the trained model written as its fp32 master weights;
* :mod:`concord.rl.run` -- one resumable run (:func:`~concord.rl.run.train`): data without gold,
  checkpoints outside the declared outputs, the output directory;
* :mod:`concord.rl.tiny` -- a tiny model that answers in ``\\boxed{}`` (tests, smoke runs).
"""
