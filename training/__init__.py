"""Training the course's bundled model (``data/models/tiny-gpt2-bilingual``): not part of the library a learner
imports, but the program that made its model, run from the repository root as ``python -m training.train``.

How it reads, bottom up: ``corpus`` (the two corpora and their token cache) and ``rows`` (the training rows drawn from
them); ``gpt2_parts`` (the one module that names GPT-2's internals: training edits the raw ``GPT2LMHeadModel`` the
course's ``Model`` hides); ``guide`` (the head guide) and ``loop`` (the training loop and its checkpoints); ``options``
(``TrainConfig``: every option and every check); ``phases`` (one run: the copy warm-up, phase 1, phase 2); ``train``
(the command line); ``card`` and ``evaluate`` (the model card and the measurements it reports). ``README.md`` beside
them tells how the bundled model was made, run by run.
"""
