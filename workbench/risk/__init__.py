"""Hallucination risk without a reference: which answers are likely made up, before anyone has the right one.

`features` reads the evidence a run already holds (the answer's log-prob, its samples' and paraphrases' meanings),
`score` turns it into one calibrated number (the estimated probability that the answer is a hallucination),
`run` scores a stored run and `stored` keeps the scores (table `answer_risk`).
"""
