package prerender

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseSize parses a byte size: a number with an optional unit, decimal
// (B, KB, MB, GB, TB: powers of 1000; K, M, G, T alike) or binary (KiB,
// MiB, GiB, TiB: powers of 1024), case-insensitive, e.g. "256MB", "1GiB",
// "20KB", "1.5GB", "4096".
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || num == "" {
		return 0, fmt.Errorf("size %q: want a number with an optional unit (e.g. 256MB, 1GiB)", s)
	}
	mult := map[string]float64{
		"": 1, "b": 1,
		"k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
		"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
	}[unit]
	if mult == 0 {
		return 0, fmt.Errorf("size %q: unknown unit %q (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)", s, t[i:])
	}
	n := v * mult
	if n < 1 || n > math.MaxInt64/2 {
		return 0, fmt.Errorf("size %q out of range", s)
	}
	return int64(n), nil
}

// RankEnv is where a rank and world size came from.
type RankEnv struct {
	Rank, WorldSize int
	// Source names the variables they were read from ("" when none was
	// set: rank 0 of 1).
	Source string
}

// RankFromEnv reads this process's rank and world size from the
// environment of common launchers, first match wins:
//
//   - LRSTREAM_RANK and LRSTREAM_WORLD_SIZE (explicit);
//   - RANK and WORLD_SIZE (torchrun, torch.distributed launchers);
//   - a Slurm job array: SLURM_ARRAY_TASK_ID, SLURM_ARRAY_TASK_MIN,
//     SLURM_ARRAY_TASK_STEP and SLURM_ARRAY_TASK_COUNT (rank = (id - min)
//     / step), combined with SLURM_PROCID / SLURM_NTASKS when the array
//     tasks run several tasks each;
//   - SLURM_PROCID and SLURM_NTASKS (srun);
//   - JOB_COMPLETION_INDEX (a Kubernetes Indexed Job), whose world size
//     (the Job's completions) must come from LRSTREAM_WORLD_SIZE or the
//     caller's flag (worldSizeHint > 0).
//
// With none of them set it returns rank 0 of 1.
func RankFromEnv(getenv func(string) string, worldSizeHint int) (RankEnv, error) {
	env := rankVars(getenv)
	for _, p := range [][2]string{{"LRSTREAM_RANK", "LRSTREAM_WORLD_SIZE"}, {"RANK", "WORLD_SIZE"}} {
		if p[0] == "LRSTREAM_RANK" && strings.TrimSpace(getenv(p[0])) == "" {
			// LRSTREAM_WORLD_SIZE alone is the world size of an
			// Indexed Job (below).
			continue
		}
		e, ok, err := env.pair(p[0], p[1])
		if err != nil {
			return e, err
		}
		if ok {
			return checkRank(e)
		}
	}
	// A Slurm job array.
	if id, ok, err := env.num("SLURM_ARRAY_TASK_ID"); err != nil {
		return RankEnv{}, err
	} else if ok {
		return env.slurmArray(id)
	}
	if e, ok, err := env.pair("SLURM_PROCID", "SLURM_NTASKS"); err != nil {
		return e, err
	} else if ok {
		return checkRank(e)
	}
	if idx, ok, err := env.num("JOB_COMPLETION_INDEX"); err != nil {
		return RankEnv{}, err
	} else if ok {
		return env.indexedJob(idx, worldSizeHint)
	}
	return RankEnv{Rank: 0, WorldSize: 1}, nil
}

// rankVars reads the environment variables that give a rank.
type rankVars func(string) string

// num reads variable name as a non-negative integer; ok says whether it
// is set.
func (getenv rankVars) num(name string) (n int, ok bool, err error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return 0, false, nil
	}
	n, err = strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, true, fmt.Errorf("%s=%q is not a non-negative integer", name, v)
	}
	return n, true, nil
}

// pair reads a rank and world size variable, which must be set together;
// ok says whether they are.
func (getenv rankVars) pair(rn, wn string) (RankEnv, bool, error) {
	r, okR, err := getenv.num(rn)
	if err != nil {
		return RankEnv{}, true, err
	}
	w, okW, err := getenv.num(wn)
	if err != nil {
		return RankEnv{}, true, err
	}
	if !okR && !okW {
		return RankEnv{}, false, nil
	}
	if !okR || !okW {
		return RankEnv{}, true, fmt.Errorf("%s and %s must be set together", rn, wn)
	}
	return RankEnv{Rank: r, WorldSize: w, Source: rn + "/" + wn}, true, nil
}

// checkRank refuses a rank outside its world size.
func checkRank(e RankEnv) (RankEnv, error) {
	if e.WorldSize < 1 || e.Rank >= e.WorldSize {
		return e, fmt.Errorf("rank %d of world size %d from %s", e.Rank, e.WorldSize, e.Source)
	}
	return e, nil
}

// slurmArray returns the rank of task id of a Slurm job array, times the
// job's tasks (SLURM_PROCID/SLURM_NTASKS) when there are several.
func (getenv rankVars) slurmArray(id int) (RankEnv, error) {
	lo, _, err := getenv.num("SLURM_ARRAY_TASK_MIN")
	if err != nil {
		return RankEnv{}, err
	}
	step, okStep, err := getenv.num("SLURM_ARRAY_TASK_STEP")
	if err != nil {
		return RankEnv{}, err
	}
	if !okStep || step < 1 {
		step = 1
	}
	count, okCount, err := getenv.num("SLURM_ARRAY_TASK_COUNT")
	if err != nil {
		return RankEnv{}, err
	}
	if !okCount {
		return RankEnv{}, fmt.Errorf("SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not (Slurm too old?); pass --rank and --world-size")
	}
	e := RankEnv{Rank: (id - lo) / step, WorldSize: count, Source: "SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT"}
	if t, ok, err := getenv.pair("SLURM_PROCID", "SLURM_NTASKS"); err != nil {
		return e, err
	} else if ok && t.WorldSize > 1 {
		e = RankEnv{Rank: e.Rank*t.WorldSize + t.Rank, WorldSize: e.WorldSize * t.WorldSize,
			Source: e.Source + " x SLURM_PROCID/SLURM_NTASKS"}
	}
	return checkRank(e)
}

// indexedJob returns the rank of completion index idx of a Kubernetes
// Indexed Job; its world size is worldSizeHint when positive, else
// LRSTREAM_WORLD_SIZE.
func (getenv rankVars) indexedJob(idx, worldSizeHint int) (RankEnv, error) {
	w := worldSizeHint
	if w <= 0 {
		var ok bool
		var err error
		if w, ok, err = getenv.num("LRSTREAM_WORLD_SIZE"); err != nil {
			return RankEnv{}, err
		} else if !ok {
			return RankEnv{}, fmt.Errorf("JOB_COMPLETION_INDEX is set (Kubernetes Indexed Job) but the world size is not: pass --world-size (the Job's completions) or set LRSTREAM_WORLD_SIZE")
		}
	}
	return checkRank(RankEnv{Rank: idx, WorldSize: w, Source: "JOB_COMPLETION_INDEX"})
}
