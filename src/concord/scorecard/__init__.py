"""Reproduction scorecard: every number the three papers print beside the number a run reproduced."""
