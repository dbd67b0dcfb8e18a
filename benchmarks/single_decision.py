"""CPU time of one decision on the embedded model: a state it has not seen, one question.

    python benchmarks/single_decision.py [--rounds 50] [--words 60]

The model is loaded and its option and background vectors are cached first, as
in a running server; each round then asks about a new state, so the state is
always encoded. Prints the median and 95th percentile CPU milliseconds per
question shape.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from decirank.backends import create_backend
from decirank.types.questions import ChoiceQuestion, DecisionRequest, LikelihoodQuestion, ScoreQuestion

INTENTS = [f"intent number {i} about banking topic {i}" for i in range(77)]
LABELS = ChoiceQuestion("What does the customer want?", {str(i): text for i, text in enumerate(INTENTS)})
#: Each shape's question for round ``i``; the filter item changes with the round, as the state does.
SHAPES = {
    "topic yes/no": lambda i: LikelihoodQuestion("Is the customer asking about card arrival?"),
    # Read as asked and as its plain form, or once, as the shipped blend says (Blend.negated_reads).
    "negated yes/no": lambda i: LikelihoodQuestion("Has the card not arrived yet?"),
    "true/false descriptions": lambda i: LikelihoodQuestion("Is it positive?", true="a good film", false="a bad film"),
    "choice among 77 labels": lambda i: LABELS,
    "filter item": lambda i: LikelihoodQuestion(f"Is this about pets?\nItem: a dog with {i} fleas on the sofa"),
    # Asked "how", each level is read with the state: three reads of the reader.
    "score, 3 levels": lambda i: ScoreQuestion("How urgent is this message?", ("low", "medium", "high")),
}


#: More of a customer's message, to make a state as long as ``--words`` asks.
FILLER = (
    "I ordered it from the app two weeks ago and the tracking page still says it is being prepared, so I would like "
    "to know whether it was lost in the post and whether I should cancel it and order a new one."
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--words", type=int, default=0, help="make each state this many words long (default: short)")
    arguments = parser.parse_args()
    rounds = arguments.rounds
    backend = create_backend("local")
    backend.load()
    for shape, (name, question_for) in enumerate(SHAPES.items()):
        asyncio.run(backend.decide(DecisionRequest(state="warm up", questions={"q": question_for(-1)})))
        cpu = []
        for i in range(rounds):
            # Numbered by shape too: a state another shape has read would come from the cache.
            number = 1000 * shape + i
            state = f"my card number {number} has not arrived after {i} days"
            if arguments.words:
                words = (state + ". " + FILLER).split()
                state = " ".join((words * (arguments.words // len(words) + 1))[: arguments.words])
            request = DecisionRequest(state=state, questions={"q": question_for(i)})
            started = time.process_time()
            asyncio.run(backend.decide(request))
            cpu.append(1000 * (time.process_time() - started))
        cpu.sort()
        print(f"{name:26} median {statistics.median(cpu):6.1f} ms CPU   p95 {cpu[int(0.95 * len(cpu)) - 1]:6.1f} ms")


if __name__ == "__main__":
    main()
