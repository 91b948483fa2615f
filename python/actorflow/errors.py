"""TF's error classes (tf.errors): what a failed step or session raises.

    try:
        sess.run(c)
    except tf.errors.InvalidArgumentError as e:
        print(e.message)

Every actorflow status code (graph/status.hpp) maps to one class; the extension raises them
through _error_from_code.
"""

OK = 0
CANCELLED = 1
UNKNOWN = 2
INVALID_ARGUMENT = 3
DEADLINE_EXCEEDED = 4
NOT_FOUND = 5
ALREADY_EXISTS = 6
PERMISSION_DENIED = 7
RESOURCE_EXHAUSTED = 8
FAILED_PRECONDITION = 9
ABORTED = 10
OUT_OF_RANGE = 11
UNIMPLEMENTED = 12
INTERNAL = 13
UNAVAILABLE = 14
DATA_LOSS = 15


class OpError(Exception):
    """A failed operation: `message` says what failed (actorflow names the node and device)."""

    def __init__(self, node_def, op, message, error_code=UNKNOWN):
        super().__init__(message)
        self._node_def = node_def
        self._op = op
        self._message = message
        self._error_code = error_code

    @property
    def message(self):
        return self._message

    @property
    def op(self):
        return self._op

    @property
    def node_def(self):
        return self._node_def

    @property
    def error_code(self):
        return self._error_code

    def __str__(self):
        return self._message


def _error_class(name, code):
    def __init__(self, node_def=None, op=None, message=""):
        OpError.__init__(self, node_def, op, message, code)

    return type(name, (OpError,), {"__init__": __init__, "__module__": __name__})


CancelledError = _error_class("CancelledError", CANCELLED)
UnknownError = _error_class("UnknownError", UNKNOWN)
InvalidArgumentError = _error_class("InvalidArgumentError", INVALID_ARGUMENT)
DeadlineExceededError = _error_class("DeadlineExceededError", DEADLINE_EXCEEDED)
NotFoundError = _error_class("NotFoundError", NOT_FOUND)
AlreadyExistsError = _error_class("AlreadyExistsError", ALREADY_EXISTS)
PermissionDeniedError = _error_class("PermissionDeniedError", PERMISSION_DENIED)
ResourceExhaustedError = _error_class("ResourceExhaustedError", RESOURCE_EXHAUSTED)
FailedPreconditionError = _error_class("FailedPreconditionError", FAILED_PRECONDITION)
AbortedError = _error_class("AbortedError", ABORTED)
OutOfRangeError = _error_class("OutOfRangeError", OUT_OF_RANGE)
UnimplementedError = _error_class("UnimplementedError", UNIMPLEMENTED)
InternalError = _error_class("InternalError", INTERNAL)
UnavailableError = _error_class("UnavailableError", UNAVAILABLE)
DataLossError = _error_class("DataLossError", DATA_LOSS)

# actorflow's errc names (graph/status.hpp's to_string) to classes.
_CLASS_OF_CODE = {
    "invalid_argument": InvalidArgumentError,
    "not_found": NotFoundError,
    "already_exists": AlreadyExistsError,
    "failed_precondition": FailedPreconditionError,
    "unimplemented": UnimplementedError,
    "out_of_range": OutOfRangeError,
    "data_loss": DataLossError,
    "aborted": AbortedError,
    "unavailable": UnavailableError,
    "deadline_exceeded": DeadlineExceededError,
    "resource_exhausted": ResourceExhaustedError,
    "internal": InternalError,
    "permission_denied": PermissionDeniedError,
    "cancelled": CancelledError,
}


def _error_from_code(code, message):
    """The exception for actorflow status code `code` (its name, e.g. "not_found")."""
    return _CLASS_OF_CODE.get(code, UnknownError)(None, None, message)
