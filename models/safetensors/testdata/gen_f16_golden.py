# Regenerates f16_golden.json: python3 gen_f16_golden.py (no third-party modules).
import json, random, struct, sys

random.seed(5)
pairs = []


def add(bits):
    f = struct.unpack('<f', struct.pack('<I', bits))[0]
    if f != f:
        return
    try:
        h = struct.unpack('<H', struct.pack('<e', f))[0]
    except OverflowError:
        h = 0x7c00 | (0x8000 if f < 0 else 0)  # struct refuses values that round past 65504
    pairs.append([bits, h])


for _ in range(300):
    exp = random.randint(127 - 27, 127 + 16)
    add((random.getrandbits(1) << 31) | (exp << 23) | random.getrandbits(23))
for _ in range(50):  # exact ties: the 13 dropped bits are 0x1000
    exp = random.randint(127 - 14, 127 + 15)
    add((exp << 23) | (random.getrandbits(10) << 13) | 0x1000)
json.dump({"generator": "python3 %s struct.pack('<e') (IEEE round-half-even), random.seed(5); OverflowError mapped to Inf" % sys.version.split()[0],
           "f32_bits_to_f16_bits": pairs}, open('f16_golden.json', 'w'))
