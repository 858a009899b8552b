package bus

import "github.com/nats-io/nats.go/jetstream"

// Feed turns a pull iterator into a channel of up to n waiting messages, for a loop that
// also selects on other things (a ticker, a context). drain stops the iterator and waits
// for the goroutine that feeds the channel, so none outlives its reader.
func Feed(it jetstream.MessagesContext, n int) (msgs <-chan jetstream.Msg, drain func()) {
	ch := make(chan jetstream.Msg, n)
	go func() {
		defer close(ch)
		for {
			m, err := it.Next()
			if err != nil {
				return
			}
			ch <- m
		}
	}()
	return ch, func() {
		it.Stop()
		for range ch {
		}
	}
}
