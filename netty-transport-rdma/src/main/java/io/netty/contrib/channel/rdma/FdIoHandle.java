package io.netty.contrib.channel.rdma;

import io.netty.channel.IoEvent;
import io.netty.channel.IoHandle;
import io.netty.channel.IoOps;

/**
 * What an {@link RdmaIoHandler} drives besides RDMA: a plain file descriptor (a kernel socket) watched for
 * readiness by the loop's epoll ({@link FdWatcher}). {@link #handle} gets a {@link FdIoEvent} on the loop thread;
 * {@link io.netty.channel.IoRegistration#submit} takes {@link FdIoOps} and sets which readiness to report.
 */
interface FdIoHandle extends IoHandle {
    int EPOLLIN = 0x001;
    int EPOLLOUT = 0x004;
    int EPOLLERR = 0x008;
    int EPOLLHUP = 0x010;

    /** The file descriptor to watch; open for as long as the handle is registered. */
    int fd();

    /** The readiness a handle asks to be told about: {@link #EPOLLIN} and/or {@link #EPOLLOUT}. */
    record FdIoOps(int events) implements IoOps {
    }

    /**
     * The readiness epoll reported ({@code EPOLL*} bits). One instance per loop, reused: valid only during the
     * call to {@link #handle}.
     */
    final class FdIoEvent implements IoEvent {
        private int events;

        public int events() {
            return events;
        }

        void events(int events) {
            this.events = events;
        }

        @Override
        public String toString() {
            return "FdIoEvent(0x" + Integer.toHexString(events) + ")";
        }
    }
}
