package handler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
)

// inProcess is an http.RoundTripper that serves each request with an
// http.Handler in the calling process: no listener, no port. The response
// body is a pipe the handler writes into, so streamed responses arrive as
// the handler flushes them. Closing the body or cancelling the request
// context cancels the handler's request context.
type inProcess struct {
	h http.Handler
}

var _ http.RoundTripper = inProcess{}

func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	pr, pw := io.Pipe()
	// A cancelled call unblocks both ends of the pipe.
	stop := context.AfterFunc(ctx, func() { pw.CloseWithError(context.Cause(ctx)) })

	sreq := req.Clone(ctx)
	sreq.RequestURI = req.URL.RequestURI()
	sreq.RemoteAddr = "127.0.0.1:0"
	if sreq.Body == nil {
		sreq.Body = http.NoBody
	}
	w := &pipeWriter{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if r := recover(); r != nil {
				w.fail(fmt.Errorf("builtin handler panicked: %v", r))
			}
		}()
		t.h.ServeHTTP(w, sreq)
		w.WriteHeader(http.StatusOK) // a handler that wrote nothing answers 200, empty
		_ = pw.Close()
	}()

	select {
	case <-w.ready:
	case <-ctx.Done():
		// The handler has not answered; it sees the cancellation too.
		cancel(context.Cause(ctx))
		stop()
		return nil, context.Cause(ctx)
	}
	if w.failed != nil {
		cancel(w.failed)
		stop()
		return nil, w.failed
	}
	resp := &http.Response{
		Status:        strconv.Itoa(w.status) + " " + http.StatusText(w.status),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sent,
		ContentLength: -1,
		Request:       req,
		Body: &pipeBody{PipeReader: pr, close: func() {
			cancel(errBodyClosed)
			stop()
		}},
	}
	return resp, nil
}

var errBodyClosed = errors.New("response body closed")

// pipeBody cancels the handler when the client is done with the body.
type pipeBody struct {
	*io.PipeReader
	once  sync.Once
	close func()
}

func (b *pipeBody) Close() error {
	b.once.Do(b.close)
	return b.PipeReader.Close()
}

// pipeWriter is the handler's ResponseWriter. The handler goroutine is its
// only writer; ready is closed once the status and headers are known.
type pipeWriter struct {
	header http.Header
	sent   http.Header
	status int
	pw     *io.PipeWriter
	ready  chan struct{}
	failed error
	once   sync.Once
}

var _ http.Flusher = (*pipeWriter)(nil)

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(code int) {
	w.once.Do(func() {
		if code < 100 || code > 999 {
			code = http.StatusInternalServerError
		}
		w.status = code
		w.sent = w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.pw.Write(p)
}

// Flush sends the headers; body bytes are unbuffered already.
func (w *pipeWriter) Flush() { w.WriteHeader(http.StatusOK) }

// fail ends the response with err: before the headers, RoundTrip returns
// err; after them, the body read fails with it.
func (w *pipeWriter) fail(err error) {
	w.once.Do(func() {
		w.failed = err
		close(w.ready)
	})
	w.pw.CloseWithError(err)
}
