"""The ground floor: records and helpers every other room shares, standard library only.

- ``errors``: the error hierarchy (:class:`DeeprepoError` and its children);
- ``chat``: a model call's records (``Message``, ``ChatRequest``, ``Completion``,
  ``Usage``) and the ``ChatModel`` protocol every model implements;
- ``finding``: the ``Finding`` record;
- ``records``: an episode's records (``Turn``, ``RunResult``, ``Behaviour``, stop reasons);
- ``prompts``: every prompt, and the file-block format the kernel, workers and coverage
  share (the sandbox child imports it);
- ``textsafe`` and ``jsonl``: showing untrusted text, reading JSON-lines files;
- ``closing``: the one ``close()`` / ``with`` base of every resource deeprepo opens.

Nothing here imports another deeprepo package or a third-party library: the sandbox's
child process imports these modules with only the standard library available.
"""
