"""The template matcher of the ``template-matcher`` route: line shape → (kind, CWE).

Written by ``benchmarks/train_shape_matcher.py``; do not edit.
"""

TRAINED_ON: dict[str, object] = {
    "base_seeds": [9001, 9002, 9003, 9004, 9005, 9006],
    "langs": ["python", "js", "mixed"],
    "n": 4,
    "sizes": ["small", "medium", "large"],
    "tasks": 216,
    "threshold": 0.3,
}
SHAPES: dict[str, tuple[str, str]] = {
    "I = I(I(I), I)": ("off-by-one", "CWE-193"),
    "I = I(I(I), I=I)": ("resource-leak", "CWE-772"),
    "I = I.I(I.I(I) for I in I(I))": ("insecure-randomness", "CWE-330"),
    "I = []": ("resource-leak", "CWE-772"),
    "I.I(I, I.I - I)": ("race-condition", "CWE-362"),
    "I.I(I.I(I, (I,)).I())": ("resource-leak", "CWE-772"),
    "I[I] = I + I": ("race-condition", "CWE-362"),
    "await I.I(I, I + I);": ("race-condition", "CWE-362"),
    "await I.I(I, I.I - I);": ("race-condition", "CWE-362"),
    "const I = I * I;": ("off-by-one", "CWE-193"),
    "const I = I(I.I(I + I.I() * I));": ("insecure-randomness", "CWE-330"),
    "const I = I.I().I(I).I(I, I);": ("insecure-randomness", "CWE-330"),
    "const I = I.I(I.from(I, I).I(I));": ("unsafe-deserialization", "CWE-502"),
    "const I = await I.I(I(I.I.I));": ("missing-authorization", "CWE-862"),
    "const I = await I.I(I, [I]);": ("resource-leak", "CWE-772"),
    "const I = await this.I.I.I();": ("resource-leak", "CWE-772"),
    "for I in I(I, I):": ("off-by-one", "CWE-193"),
    "if ((I.I.I || []).I(I)) {": ("missing-authorization", "CWE-862"),
    "if (I.I < I) {": ("race-condition", "CWE-362"),
    "if I in I.I.I(I, ()):": ("missing-authorization", "CWE-862"),
    "if I.I < I:": ("race-condition", "CWE-362"),
    "if I.I.I(I):": ("race-condition", "CWE-362"),
    "let I = I * I;": ("off-by-one", "CWE-193"),
    "let I = I.I().I(I).I(I, I);": ("insecure-randomness", "CWE-330"),
    "let I = I.I(I + I + I);": ("unsafe-deserialization", "CWE-502"),
    "let I = await I.I(I(I.I.I));": ("missing-authorization", "CWE-862"),
    "return I % I.I(I)": ("insecure-randomness", "CWE-330"),
    "return I, I * I": ("off-by-one", "CWE-193"),
    "return I.I((I + I).I()).I()": ("weak-password-hash", "CWE-916"),
    "return I.I(I).I(I + I).I(I);": ("weak-password-hash", "CWE-916"),
    "return I.I(I.from(I, I).I(I));": ("unsafe-deserialization", "CWE-502"),
    "return I.I.I((I) => I.I(I));": ("resource-leak", "CWE-772"),
    "return [I.I() for I in I[: I - I]]": ("off-by-one", "CWE-193"),
    "return { I, I: I * I };": ("off-by-one", "CWE-193"),
}
