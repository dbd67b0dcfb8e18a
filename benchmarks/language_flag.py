"""How often the embedded model's "non_english" note fires: on DL19's English passages and queries
(should be almost never) and on one sentence in each of 13 other languages (should be always).

    .venv/bin/python benchmarks/language_flag.py [--data ../shared/data/trec-dl19]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from decirank.backends.local._language import looks_non_english

OTHER_LANGUAGES = {
    "fr": "Le chat dort sur le canapé depuis ce matin, et il ne veut pas bouger de là pour manger ses croquettes.",
    "es": "El perro juega en el jardín con la pelota mientras los niños miran desde la ventana de la casa.",
    "de": "Der Hund spielt im Garten mit dem Ball und die Kinder schauen zu, weil es ein schöner Tag ist.",
    "it": "Il gatto dorme sul divano della cucina e non vuole muoversi per mangiare, anche se ha fame.",
    "pt": "O cachorro brinca no jardim com a bola enquanto as crianças olham pela janela da casa.",
    "nl": "De hond speelt in de tuin met de bal en de kinderen kijken toe, omdat het een mooie dag is.",
    "zh": "这只猫整个上午都在沙发上睡觉，不想起来吃东西。",
    "ja": "猫は朝からずっとソファで寝ていて、ご飯を食べに動こうとしません。",
    "ru": "Кошка спит на диване с самого утра и не хочет вставать, чтобы поесть.",
    "ar": "القطة نائمة على الأريكة منذ الصباح ولا تريد أن تتحرك لتأكل.",
    "ko": "고양이는 아침부터 소파에서 자고 있고 밥을 먹으러 움직이려 하지 않는다.",
    "el": "Η γάτα κοιμάται στον καναπέ από το πρωί και δεν θέλει να σηκωθεί για να φάει.",
    "hi": "बिल्ली सुबह से सोफे पर सो रही है और खाने के लिए उठना नहीं चाहती।",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(Path(__file__).parents[2] / "shared" / "data" / "trec-dl19"))
    data = Path(parser.parse_args().data)
    run = json.loads((data / "bm25_top100.json").read_text())
    english = list({hit["docid"]: hit["content"] for query in run for hit in query["hits"]}.values())
    english += [query["query"] for query in run]
    flagged = [text for text in english if looks_non_english(text)]
    print(f"DL19 passages and queries flagged: {len(flagged)} of {len(english)}")
    for text in flagged:
        print(f"  {text[:100]!r}")
    caught = [language for language, text in OTHER_LANGUAGES.items() if looks_non_english(text)]
    print(f"other languages flagged: {len(caught)} of {len(OTHER_LANGUAGES)} ({', '.join(caught)})")


if __name__ == "__main__":
    main()
