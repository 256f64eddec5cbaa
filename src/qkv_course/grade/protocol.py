"""The wire format between the trusted grader and a submission's sandboxed worker: data only.

A message is one header line, a JSON object in UTF-8 ending in ``\\n``, followed by the raw
bytes of the tensors it carries, one after the other, in the order of the header's
``"tensors"`` list. Each entry there is ``[dtype, shape, nbytes]``, with ``dtype`` a name from
:data:`DTYPES`; the value itself (key ``"value"``) is a tree in which

- ``str``, ``int``, ``float`` (NaN and infinities included), ``bool`` and ``None`` are plain JSON;
- ``{"tensor": i}`` is the ``i``-th tensor; ``{"tuple": [...]}``, ``{"list": [...]}`` and
  ``{"dict": [[key, value], ...]}`` (keys ``str`` or ``int``) are containers.

Nothing is ever unpickled, evaluated or imported on the way in. The parent treats every byte
from a worker as hostile: :class:`Channel` reads with a deadline and caps (:class:`Caps`) on
the header's length, the tree's depth and size, each tensor's rank and the total number of
bytes, and checks ``prod(shape) * itemsize == nbytes`` before it reads a byte of a tensor.
Anything else (bad JSON, an unknown dtype, a wrong length, a stream that ends early) raises
:class:`ProtocolError` for that submission only.
"""

from __future__ import annotations

import json
import math
import numbers
import socket
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

# dtype name -> bytes per element. Everything the course's checks exchange; nothing with Python
# objects in it (no object arrays), nothing whose bytes are not the whole value.
DTYPES = {
    "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "complex64": 8, "complex128": 16,
    "bool": 1, "uint8": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8,
}


class ProtocolError(Exception):
    """A message broke the protocol (malformed, too big, of the wrong shape)."""


class ChannelClosed(ProtocolError):
    """The other end closed the connection (its process ended)."""


class Deadline(ProtocolError):
    """The other end did not answer before the deadline."""


@dataclass(frozen=True)
class Caps:
    """Caps on one message read from the other side.

    Attributes:
        header_bytes: longest header line (the JSON object, without the tensors' bytes).
        total_bytes: most bytes of tensor data in one message.
        tensors: most tensors in one message.
        depth: deepest nesting of containers.
        nodes: most values (containers, scalars, tensors) in one message's tree.
        rank: most dimensions of one tensor.
        text: longest string anywhere in the tree, in characters.
    """

    header_bytes: int = 1 << 20
    total_bytes: int = 256 << 20
    tensors: int = 4096
    depth: int = 32
    nodes: int = 100_000
    rank: int = 16
    text: int = 1 << 20


# ---------------------------------------------------------------- encoding (either side)
class NotEncodable(TypeError):
    """A value holds something that is not data (its type name is the message)."""


def encode(header: Dict[str, Any], value: Any = None) -> List[Any]:
    """A message as chunks to write: the header line, then each tensor's bytes.

    Args:
        header: the message's fields (JSON-serialisable); ``"value"`` and ``"tensors"`` are set here.
        value: data to carry (see the module's docstring); tensors are sent contiguous, on the CPU.

    Returns:
        ``[header_bytes, buffer, ...]`` for :meth:`Channel.send`.

    Raises:
        NotEncodable: ``value`` holds something that is not data.
    """
    tensors: List[Any] = []
    tree = _tree(value, tensors, 0)
    blobs, specs = [], []
    for t in tensors:
        flat, name = _raw(t)
        specs.append([name, list(t.shape), len(flat)])
        blobs.append(flat)
    line = json.dumps({**header, "value": tree, "tensors": specs}, allow_nan=True,
                      separators=(",", ":")).encode() + b"\n"
    return [line, *blobs]


def _tree(value: Any, tensors: List[Any], depth: int) -> Any:
    if depth > 64:
        raise NotEncodable("data nested more than 64 deep")
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str(value) if type(value) is not str else value
    if isinstance(value, numbers.Integral):  # numpy's integers too
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    kind = type(value).__module__ + "." + type(value).__qualname__
    if isinstance(value, (tuple, list)):
        items = [_tree(v, tensors, depth + 1) for v in value]
        return {"tuple" if isinstance(value, tuple) else "list": items}
    if isinstance(value, dict):
        pairs = []
        for k, v in value.items():
            if type(k) not in (str, int):
                raise NotEncodable(f"a dict with a {type(k).__name__} key")
            pairs.append([k, _tree(v, tensors, depth + 1)])
        return {"dict": pairs}
    try:
        import torch
    except ImportError:  # pragma: no cover - the course always has torch
        raise NotEncodable(kind) from None
    if isinstance(value, torch.Tensor) and value.layout == torch.strided and not value.is_meta:
        tensors.append(value)
        return {"tensor": len(tensors) - 1}
    raise NotEncodable(kind)


def _raw(t: Any) -> Tuple[Any, str]:
    """A tensor's bytes (row-major, on the CPU) and its dtype's name."""
    import torch
    name = str(t.dtype).replace("torch.", "")
    if name not in DTYPES:
        raise NotEncodable(f"a tensor of dtype {name}")
    plain = torch.Tensor.as_subclass(t, torch.Tensor).detach().cpu().resolve_conj().resolve_neg()
    flat = plain.contiguous().reshape(-1)
    if flat.numel() == 0:
        return b"", name
    return memoryview(flat.view(torch.uint8).numpy()).cast("B"), name


# ---------------------------------------------------------------- decoding (hostile input)
def decode_header(line: bytes, caps: Caps) -> Tuple[Dict[str, Any], List[Tuple[str, List[int], int]]]:
    """Parse and check a header line; return it and its validated tensor specs."""
    try:
        header = json.loads(line.decode("utf-8"))
    except (ValueError, RecursionError, UnicodeDecodeError) as e:
        raise ProtocolError(f"the header is not JSON ({type(e).__name__})") from None
    if not isinstance(header, dict):
        raise ProtocolError("the header is not a JSON object")
    specs = header.get("tensors", [])
    if not isinstance(specs, list) or len(specs) > caps.tensors:
        raise ProtocolError(f"'tensors' must be a list of at most {caps.tensors} entries")
    checked, total = [], 0
    for spec in specs:
        if not (isinstance(spec, list) and len(spec) == 3 and spec[0] in DTYPES
                and isinstance(spec[1], list) and len(spec[1]) <= caps.rank
                and all(type(d) is int and 0 <= d < 1 << 48 for d in spec[1])
                and type(spec[2]) is int):
            raise ProtocolError(f"a tensor entry is not [dtype, shape, nbytes]: {str(spec)[:80]}")
        dtype, shape, nbytes = spec
        if math.prod(shape) * DTYPES[dtype] != nbytes:
            raise ProtocolError(f"a {dtype} tensor of shape {shape} cannot have {nbytes} bytes")
        total += nbytes
        if total > caps.total_bytes:
            raise ProtocolError(f"the message carries more than {caps.total_bytes} bytes of tensors")
        checked.append((dtype, shape, nbytes))
    return header, checked


def build(tree: Any, tensors: List[Any], caps: Caps) -> Any:
    """The value a checked tree describes, with ``tensors`` (already read) in place."""
    budget = [caps.nodes]

    def walk(node: Any, depth: int) -> Any:
        budget[0] -= 1
        if budget[0] < 0 or depth > caps.depth:
            raise ProtocolError("the value is nested too deep or has too many parts")
        if node is None or type(node) in (bool, int, float):
            return node
        if type(node) is str:
            if len(node) > caps.text:
                raise ProtocolError("a string in the value is too long")
            return node
        if type(node) is not dict or len(node) != 1:
            raise ProtocolError(f"unknown node in the value: {str(node)[:80]}")
        (kind, body), = node.items()
        if kind == "tensor" and type(body) is int and 0 <= body < len(tensors):
            return tensors[body]
        if kind in ("tuple", "list") and type(body) is list:
            items = [walk(v, depth + 1) for v in body]
            return tuple(items) if kind == "tuple" else items
        if kind == "dict" and type(body) is list:
            out = {}
            for pair in body:
                if type(pair) is not list or len(pair) != 2 or type(pair[0]) not in (str, int):
                    raise ProtocolError("a dict entry is not [str or int key, value]")
                out[pair[0]] = walk(pair[1], depth + 1)
            return out
        raise ProtocolError(f"unknown node in the value: {str(node)[:80]}")

    return walk(tree, 0)


def tensor_from(buffer: bytearray, dtype: str, shape: List[int]) -> Any:
    """A tensor that owns ``buffer`` (checked: its length is ``prod(shape) * itemsize``)."""
    import torch
    dt = getattr(torch, dtype)
    if not buffer:
        return torch.empty(shape, dtype=dt)
    return torch.frombuffer(buffer, dtype=dt).reshape(shape)


class Channel:
    """One end of a connected stream socket, speaking the protocol.

    Args:
        sock: a connected ``SOCK_STREAM`` socket (``socket.socketpair()``).
        caps: the caps on what this end accepts.
    """

    def __init__(self, sock: socket.socket, caps: Caps = Caps()) -> None:
        self.sock = sock
        self.caps = caps
        self._buf = bytearray()

    def send(self, header: Dict[str, Any], value: Any = None,
             deadline: Optional[float] = None) -> None:
        """Write one message (raises :class:`Deadline` past ``deadline``, a ``time.monotonic()``)."""
        self.write(encode(header, value), deadline)

    def write(self, chunks: List[Any], deadline: Optional[float] = None) -> None:
        """Write a message already made by :func:`encode`."""
        for chunk in chunks:
            view = memoryview(chunk).cast("B")
            while view:
                self._wait(deadline)
                try:
                    sent = self.sock.send(view)
                except socket.timeout:
                    continue
                except (BrokenPipeError, ConnectionResetError):
                    raise ChannelClosed("the other end closed the connection") from None
                view = view[sent:]

    def recv(self, deadline: Optional[float] = None) -> Tuple[Dict[str, Any], Any]:
        """Read one message: its header (a dict) and its value, checked against the caps.

        Raises:
            ProtocolError: for anything wrong with it (never another exception: what the other
                side sends cannot raise anything else here).
        """
        try:
            line = self._line(deadline)
            header, specs = decode_header(line, self.caps)
            tensors = []
            for dtype, shape, nbytes in specs:
                buffer = bytearray(nbytes)
                self._fill(memoryview(buffer), deadline)
                tensors.append(tensor_from(buffer, dtype, shape))
            return header, build(header.get("value"), tensors, self.caps)
        except ProtocolError:
            raise
        except (ValueError, TypeError, RuntimeError, OverflowError, MemoryError, RecursionError) as e:
            # torch refusing a shape (sizes that overflow its strides), a buffer we cannot hold
            raise ProtocolError(f"a malformed message ({type(e).__name__}: {str(e)[:100]})") from None

    def close(self) -> None:
        self.sock.close()

    # -- reading with a deadline
    def _wait(self, deadline: Optional[float]) -> None:
        if deadline is None:
            self.sock.settimeout(None)
            return
        left = deadline - time.monotonic()
        if left <= 0:
            raise Deadline("no answer before the deadline")
        self.sock.settimeout(left)

    def _chunk(self, deadline: Optional[float], size: int) -> bytes:
        self._wait(deadline)
        try:
            data = self.sock.recv(size)
        except socket.timeout:
            raise Deadline("no answer before the deadline") from None
        except ConnectionResetError:
            data = b""
        if not data:
            raise ChannelClosed("the other end closed the connection")
        return data

    def _line(self, deadline: Optional[float]) -> bytes:
        limit = self.caps.header_bytes
        while True:
            end = self._buf.find(b"\n")
            if end >= 0:
                line = bytes(self._buf[:end])
                del self._buf[:end + 1]
                return line
            if len(self._buf) > limit:
                raise ProtocolError(f"a header line is longer than {limit} bytes")
            self._buf += self._chunk(deadline, 1 << 16)

    def _fill(self, view: memoryview, deadline: Optional[float]) -> None:
        take = min(len(self._buf), len(view))
        view[:take] = self._buf[:take]
        del self._buf[:take]
        done = take
        while done < len(view):
            self._wait(deadline)
            try:
                got = self.sock.recv_into(view[done:], len(view) - done)
            except socket.timeout:
                raise Deadline("no answer before the deadline") from None
            except ConnectionResetError:
                got = 0
            if not got:
                raise ChannelClosed("the stream ended in the middle of a tensor")
            done += got
