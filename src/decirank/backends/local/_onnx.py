"""Just enough of the ONNX file format to read packaged weights and write our own graphs.

The packaged MiniLM graph keeps int8 weights but multiplies them back to float
before every MatMul, so onnxruntime runs it at float32 speed. Rebuilding the
encoder around the same int8 weights with onnxruntime's fused int8 kernels
(``DynamicQuantizeMatMul``) is about twice as fast. The ``onnx`` package
could build that graph, but it is a large dependency for a few hundred bytes
of protobuf, so this module speaks the wire format directly: a reader for the
initializers of a model file and a writer for the handful of message types a
graph needs (field numbers from ``onnx.proto``).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Graph", "read_initializers"]

# TensorProto.DataType
_FLOAT, _UINT8, _INT8, _INT32, _INT64 = 1, 2, 3, 6, 7
_DTYPES = {_FLOAT: np.float32, _UINT8: np.uint8, _INT8: np.int8, _INT32: np.int32, _INT64: np.int64}
_CODES = {np.dtype(dtype): code for code, dtype in _DTYPES.items()}

# AttributeProto.AttributeType
_ATTR_FLOAT, _ATTR_INT, _ATTR_STRING, _ATTR_INTS = 1, 2, 3, 7

_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5


# --- reading -----------------------------------------------------------------------------


def _read_varint(data: memoryview, position: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, position
        shift += 7


def _fields(data: memoryview) -> Iterator[tuple[int, int, int | memoryview]]:
    """(field number, wire type, value) for each field of one message."""
    position = 0
    while position < len(data):
        key, position = _read_varint(data, position)
        number, wire = key >> 3, key & 7
        if wire == _VARINT:
            value, position = _read_varint(data, position)
        elif wire == _BYTES:
            length, position = _read_varint(data, position)
            value = data[position : position + length]
            position += length
        elif wire == _FIXED64:
            value, position = data[position : position + 8], position + 8
        elif wire == _FIXED32:
            value, position = data[position : position + 4], position + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield number, wire, value


def _read_tensor(data: memoryview) -> tuple[str, np.ndarray | None]:
    """A tensor's name and value; None for types no encoder here needs (bool, strings)."""
    dims: list[int] = []
    name, code, raw = "", 0, None
    for number, wire, value in _fields(data):
        if number == 1:  # dims: plain or packed varints
            if wire == _BYTES:
                position = 0
                while position < len(value):
                    dim, position = _read_varint(value, position)
                    dims.append(dim)
            else:
                dims.append(value)
        elif number == 2:
            code = value
        elif number == 8:
            name = bytes(value).decode()
        elif number == 9:
            raw = value
    if code not in _DTYPES:
        return name, None
    if raw is None:
        raise ValueError(f"initializer {name!r} is not stored as raw data")
    return name, np.frombuffer(raw, dtype=_DTYPES[code]).reshape(dims)


def read_initializers(path: str) -> dict[str, np.ndarray]:
    """The weights (``GraphProto.initializer``) of an ONNX model file, by name."""
    with open(path, "rb") as file:
        model = memoryview(file.read())
    weights: dict[str, np.ndarray] = {}
    for number, _, graph in _fields(model):
        if number == 7:  # ModelProto.graph
            for graph_field, _, value in _fields(graph):
                if graph_field == 5:  # GraphProto.initializer
                    name, array = _read_tensor(value)
                    if array is not None:
                        weights[name] = array
    return weights


# --- writing -----------------------------------------------------------------------------
# Messages are kept as lists of parts and joined once at the end: nesting by concatenation
# would copy every weight once per level, and the allocator keeps those copies' memory.


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64 values travel as their two's complement
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


class _Message:
    def __init__(self) -> None:
        self.parts: list[bytes | memoryview] = []
        self.size = 0

    def _add(self, *parts: bytes | memoryview) -> None:
        for part in parts:
            self.parts.append(part)
            self.size += part.nbytes if isinstance(part, memoryview) else len(part)

    def int(self, number: int, value: int) -> _Message:
        self._add(_varint(number << 3 | _VARINT), _varint(value))
        return self

    def float(self, number: int, value: float) -> _Message:
        self._add(_varint(number << 3 | _FIXED32), struct.pack("<f", value))
        return self

    def bytes(self, number: int, value: bytes | str | memoryview) -> _Message:
        if isinstance(value, str):
            value = value.encode()
        size = value.nbytes if isinstance(value, memoryview) else len(value)
        self._add(_varint(number << 3 | _BYTES), _varint(size), value)
        return self

    def message(self, number: int, value: _Message) -> _Message:
        self._add(_varint(number << 3 | _BYTES), _varint(value.size))
        self.parts.extend(value.parts)
        self.size += value.size
        return self


def _tensor(name: str, array: np.ndarray) -> _Message:
    array = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
    tensor = _Message()
    for dim in array.shape:
        tensor.int(1, dim)
    tensor.int(2, _CODES[np.dtype(array.dtype.str.lstrip("<"))]).bytes(8, name)
    return tensor.bytes(9, memoryview(array).cast("B"))


def _attribute(name: str, value: int | float | str | Sequence[int]) -> _Message:
    attribute = _Message().bytes(1, name)
    if isinstance(value, bool | int):
        return attribute.int(20, _ATTR_INT).int(3, int(value))
    if isinstance(value, float):
        return attribute.int(20, _ATTR_FLOAT).float(2, value)
    if isinstance(value, str):
        return attribute.int(20, _ATTR_STRING).bytes(4, value)
    attribute.int(20, _ATTR_INTS)
    for item in value:
        attribute.int(8, item)
    return attribute


def _value_info(name: str, dtype: type, dims: Sequence[int | str] | None) -> _Message:
    """A typed name; ``dims`` None leaves the shape unstated."""
    tensor_type = _Message().int(1, _CODES[np.dtype(dtype)])
    if dims is not None:
        shape = _Message()
        for dim in dims:
            shape.message(1, _Message().bytes(2, dim) if isinstance(dim, str) else _Message().int(1, dim))
        tensor_type.message(2, shape)
    return _Message().bytes(1, name).message(2, _Message().message(1, tensor_type))


@dataclass
class Graph:
    """A graph under construction; :meth:`to_bytes` gives a model onnxruntime can load."""

    _nodes: list[_Message] = field(default_factory=list)
    _initializers: list[_Message] = field(default_factory=list)
    _inputs: list[_Message] = field(default_factory=list)
    _count: int = 0

    def input(self, name: str, dtype: type, dims: Sequence[int | str]) -> str:
        self._inputs.append(_value_info(name, dtype, dims))
        return name

    def constant(self, array: np.ndarray) -> str:
        """A weight of the graph; the array is referenced, not copied, until :meth:`to_bytes`."""
        name = f"c{len(self._initializers)}"
        self._initializers.append(_tensor(name, array))
        return name

    def node(
        self,
        op: str,
        inputs: Sequence[str],
        outputs: int = 1,
        *,
        domain: str = "",
        **attributes: int | float | str | Sequence[int],
    ) -> str | list[str]:
        """Add ``op``; returns its output name, or names when ``outputs`` is more than one.

        An empty input name stands for an omitted optional input.
        """
        self._count += 1
        names = [f"{op}_{self._count}_{i}" for i in range(outputs)]
        node = _Message()
        for name in inputs:
            node.bytes(1, name)
        for name in names:
            node.bytes(2, name)
        node.bytes(3, f"n{self._count}").bytes(4, op)
        for key, value in attributes.items():
            node.message(5, _attribute(key, value))
        if domain:
            node.bytes(7, domain)
        self._nodes.append(node)
        return names[0] if outputs == 1 else names

    def to_bytes(self, output: str) -> bytes:
        """The model, with the float tensor ``output`` as its one output."""
        graph = _Message()
        for node in self._nodes:
            graph.message(1, node)
        graph.bytes(2, "encoder")
        for tensor in self._initializers:
            graph.message(5, tensor)
        for value in self._inputs:
            graph.message(11, value)
        graph.message(12, _value_info(output, np.float32, None))
        model = _Message().int(1, 8).bytes(2, "decirank").message(7, graph)  # IR version 8 pairs with opset 17
        model.message(8, _Message().int(2, 17))
        model.message(8, _Message().bytes(1, "com.microsoft").int(2, 1))
        return b"".join(model.parts)
