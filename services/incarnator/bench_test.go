package incarnator

import (
	"strconv"
	"testing"

	"github.com/gridwire/gridwire/events"
	"github.com/gridwire/gridwire/pkg/cluster"
)

// BenchmarkPlan measures matching plus rendering every script of one job (JOB, START,
// ABORT, HOLD, RESUME, GET_JOB_STATUS, DELETE, LIST:FILE, LIST:DIR, each hashed).
// jobs/s is per core: run with -cpu 1.
func BenchmarkPlan(b *testing.B) {
	set := testSet(b, nil)
	for _, c := range []struct {
		name     string
		clusters []cluster.Cluster
		job      events.Job
	}{
		{"fork", []cluster.Cluster{forkCluster("/w")}, benchJob()},
		{"slurm", matchClusters(), func() events.Job {
			j := benchJob()
			j.Requirements = events.Requirements{LRMSDefault: events.LRMSBatch, OSName: "Lin*", Software: []events.SoftwareConstraint{{Name: "abinit", Op: ">", Version: "6"}}}
			return j
		}()},
	} {
		b.Run(c.name, func(b *testing.B) {
			p := mustPlanner(b, set, c.clusters...)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				job := c.job
				job.ID = "01BENCH" + strconv.Itoa(i)
				if _, err := p.Plan(job); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}

func benchJob() events.Job {
	return events.Job{Name: "bench", Executable: "/usr/bin/app", Arguments: []string{"--in", "data file.txt", "$(not code)", "-v"},
		Environment: []events.EnvVar{{Name: "OMP_NUM_THREADS", Value: "4"}, {Name: "NOTE", Value: "it's {taskid}"}},
		Stdin:       "in.txt", Count: 4, Requirements: events.Requirements{}}
}
