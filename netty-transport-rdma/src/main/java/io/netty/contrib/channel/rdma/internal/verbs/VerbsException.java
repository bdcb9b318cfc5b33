package io.netty.contrib.channel.rdma.internal.verbs;

/**
 * A verbs or rdma_cm call failed. Carries the call (with the detail that matters, e.g. the target QP state) and
 * the errno: {@code ibv_modify_qp(RTR) failed: EINVAL (22)}.
 */
public final class VerbsException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final String call;
    private final int errno;

    public VerbsException(String call, int errno) {
        this(call, errno, null);
    }

    public VerbsException(String call, int errno, String hint) {
        super(call + " failed: " + Errno.describe(errno) + (hint == null ? "" : "; " + hint));
        this.call = call;
        this.errno = errno;
    }

    /** The call that failed, e.g. {@code ibv_modify_qp(RTR)}. */
    public String call() {
        return call;
    }

    /** The errno the call reported. */
    public int errno() {
        return errno;
    }
}
